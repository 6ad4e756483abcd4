#include "ir/Parser.h"

#include "ir/Diagnostics.h"
#include "ir/Initializers.h"
#include "ir/InputFile.h"
#include "ir/OpAttrs.h"
#include "ir/ShapeInference.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

namespace graphc {
namespace {

class Parser {
public:
  Parser(llvm::StringRef text, llvm::StringRef file) : text_(text), file_(file) {}

  llvm::Expected<std::unique_ptr<Module>> parse();

private:
  // Lexing helpers.
  void skipSpace();
  bool atEnd() {
    skipSpace();
    return pos_ >= text_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool consume(char c);
  llvm::Error expect(char c);
  llvm::Error error(const llvm::Twine &msg) { return errorAt(pos_, msg); }
  llvm::Error errorAt(size_t at, const llvm::Twine &msg);
  /// An identifier or a quoted string.
  llvm::Expected<std::string> name(llvm::StringRef what);
  std::string peekWord();
  llvm::Expected<std::string> quoted();
  /// A quoted device name ("gpu:3"), parsed into a DeviceId.
  llvm::Expected<DeviceId> device();
  llvm::Expected<int64_t> integer();
  llvm::Expected<double> number(bool &isFloat);
  llvm::Expected<TensorType> type();
  llvm::Expected<Attribute> attribute();
  llvm::Expected<Tensor> tensorLiteral();
  llvm::Expected<Attrs> attrList(char close);
  /// A tensor of `type` from a quoted hex string.
  llvm::Expected<Tensor> hexTensor(const TensorType &type);

  // Grammar.
  llvm::Error variable(Module &m);
  llvm::Error graph(Module &m);
  llvm::Error node(Graph &g);
  llvm::Expected<Value *> valueRef(Graph &g);

  llvm::StringRef text_, file_;
  size_t pos_ = 0;
};

bool identChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.' || c == '/' || c == ':' || c == '-';
}

void Parser::skipSpace() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n')
        ++pos_;
    } else if (llvm::isSpace(c)) {
      ++pos_;
    } else {
      break;
    }
  }
}

llvm::Error Parser::errorAt(size_t at, const llvm::Twine &msg) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return makeError(file_ + ":" + llvm::Twine(line) + ":" + llvm::Twine(col) + ": " + msg);
}

bool Parser::consume(char c) {
  if (peek() != c)
    return false;
  ++pos_;
  return true;
}

llvm::Error Parser::expect(char c) {
  if (consume(c))
    return llvm::Error::success();
  if (atEnd())
    return error(llvm::Twine("expected '") + llvm::Twine(c) + "', found the end of the input");
  char found = peek();
  return error(llvm::Twine("expected '") + llvm::Twine(c) + "', found '" +
               printable(llvm::StringRef(&found, 1)) + "'");
}

std::string Parser::peekWord() {
  skipSpace();
  size_t end = pos_;
  while (end < text_.size() && identChar(text_[end]))
    ++end;
  return text_.slice(pos_, end).str();
}

llvm::Expected<DeviceId> Parser::device() {
  peek();
  size_t at = pos_;
  auto s = quoted();
  if (!s)
    return s.takeError();
  if (std::optional<DeviceId> d = DeviceId::parse(*s))
    return *d;
  return errorAt(at, "expected a device such as \"cpu:0\" or \"gpu:3\", found \"" + printable(*s) +
                         "\"");
}

llvm::Expected<std::string> Parser::quoted() {
  if (!consume('"'))
    return error("expected a string");
  std::string s;
  while (pos_ < text_.size() && text_[pos_] != '"') {
    char c = text_[pos_++];
    if (c == '\n')
      return errorAt(pos_ - 1, "unterminated string");
    if (c != '\\') {
      s += c;
      continue;
    }
    if (pos_ >= text_.size())
      break;
    char e = text_[pos_++];
    if (e == 'n') {
      s += '\n';
    } else if (e == 'x' && pos_ + 2 <= text_.size()) {
      unsigned v;
      if (text_.substr(pos_, 2).getAsInteger(16, v))
        return errorAt(pos_, "bad \\x escape");
      s += (char)v;
      pos_ += 2;
    } else {
      s += e;
    }
  }
  if (pos_ >= text_.size())
    return error("unterminated string");
  ++pos_;
  return s;
}

llvm::Expected<std::string> Parser::name(llvm::StringRef what) {
  if (peek() == '"')
    return quoted();
  std::string w = peekWord();
  if (w.empty())
    return error("expected " + what);
  pos_ += w.size();
  return w;
}

llvm::Expected<double> Parser::number(bool &isFloat) {
  skipSpace();
  size_t start = pos_;
  size_t end = pos_;
  if (end < text_.size() && (text_[end] == '-' || text_[end] == '+'))
    ++end;
  while (end < text_.size() && (llvm::isAlnum(text_[end]) || text_[end] == '.' ||
                                ((text_[end] == '-' || text_[end] == '+') &&
                                 (text_[end - 1] == 'e' || text_[end - 1] == 'E'))))
    ++end;
  llvm::StringRef tok = text_.slice(start, end);
  if (tok == "inf" || tok == "+inf" || tok == "-inf" || tok == "nan") {
    pos_ = end;
    isFloat = true;
    return tok == "nan" ? NAN : tok.startswith("-") ? -INFINITY : INFINITY;
  }
  isFloat = tok.find_first_of(".eE") != llvm::StringRef::npos;
  if (!isFloat) {
    int64_t i = 0;
    if (tok.empty() || tok.getAsInteger(10, i))
      return error("expected a number");
    pos_ = end;
    return (double)i;
  }
  std::string s = tok.str();
  char *stop = nullptr;
  double d = std::strtod(s.c_str(), &stop);
  if (stop != s.c_str() + s.size())
    return error("expected a number, found '" + tok + "'");
  pos_ = end;
  return d;
}

llvm::Expected<int64_t> Parser::integer() {
  skipSpace();
  size_t start = pos_;
  bool isFloat = false;
  auto d = number(isFloat);
  if (!d)
    return d.takeError();
  if (isFloat)
    return errorAt(start, "expected an integer");
  // Re-read exactly: doubles lose precision past 2^53.
  int64_t i = 0;
  text_.slice(start, pos_).getAsInteger(10, i);
  return i;
}

llvm::Expected<TensorType> Parser::type() {
  size_t at = (skipSpace(), pos_);
  std::string dt = peekWord();
  auto dtype = parseDType(dt);
  if (!dtype)
    return errorAt(at, "expected a type such as f32[2,3], found '" + dt + "'");
  pos_ += dt.size();
  if (auto e = expect('['))
    return e;
  TensorType t;
  t.dtype = *dtype;
  if (!consume(']')) {
    do {
      if (peekWord() == "N") {
        pos_ += 1;
        t.shape.push_back(kBatchDim);
        continue;
      }
      auto d = integer();
      if (!d)
        return d.takeError();
      if (*d < 0)
        return error("dimensions must be non-negative");
      t.shape.push_back(*d);
    } while (consume(','));
    if (auto e = expect(']'))
      return e;
  }
  if (auto e = checkTensorSize(t, "the type"))
    return errorAt(at, llvm::toString(std::move(e)));
  return t;
}

llvm::Expected<Tensor> Parser::hexTensor(const TensorType &type) {
  size_t at = (skipSpace(), pos_);
  auto s = quoted();
  if (!s)
    return s.takeError();
  // The string is read first, so the tensor is allocated only for data the
  // file holds.
  size_t bytes = (size_t)type.bytes();
  if (s->size() != 2 * bytes)
    return errorAt(at, "expected " + llvm::Twine(bytes) + " bytes of hex data for " +
                           toString(type) + ", found " + llvm::Twine(s->size() / 2));
  std::string raw;
  if (!llvm::tryGetFromHex(*s, raw))
    return errorAt(at, "malformed hex data");
  Tensor t(type);
  std::memcpy(t.raw(), raw.data(), bytes);
  return t;
}

llvm::Expected<Tensor> Parser::tensorLiteral() {
  // tensor<f32[2]> [1.0, 2.0]   or   tensor<f32[100]> "hex"
  if (auto e = expect('<'))
    return e;
  size_t at = pos_;
  auto t = type();
  if (!t)
    return t.takeError();
  if (!t->isStatic())
    return errorAt(at, "a tensor literal needs a static shape");
  if (auto e = expect('>'))
    return e;
  if (peek() == '"')
    return hexTensor(*t);
  if (auto e = expect('['))
    return e;
  // Every value takes at least one character of the file.
  if (t->numElements() > (int64_t)(text_.size() - pos_))
    return errorAt(at, toString(*t) + " needs " + llvm::Twine(t->numElements()) +
                           " values, more than the rest of the file holds");
  Tensor value(*t);
  int64_t i = 0;
  if (!consume(']')) {
    do {
      size_t at = (skipSpace(), pos_);
      bool isFloat;
      auto d = number(isFloat);
      if (!d)
        return d.takeError();
      if (i >= value.numElements())
        return error("more values than " + toString(*t) + " holds");
      int64_t exact = 0;
      if (t->dtype == DType::I64 && !isFloat && !text_.slice(at, pos_).getAsInteger(10, exact))
        value.data<int64_t>()[i++] = exact; // exact beyond 2^53
      else
        value.set(i++, *d);
    } while (consume(','));
    if (auto e = expect(']'))
      return e;
  }
  if (i != value.numElements())
    return error(toString(*t) + " needs " + llvm::Twine(value.numElements()) + " values, found " +
                 llvm::Twine(i));
  return value;
}

llvm::Expected<Attribute> Parser::attribute() {
  char c = peek();
  if (c == '"') {
    auto s = quoted();
    if (!s)
      return s.takeError();
    return Attribute(*s);
  }
  if (c == '[') {
    ++pos_;
    if (consume(']'))
      return Attribute(Ints{});
    if (peek() == '"') {
      Strings ss;
      do {
        auto s = quoted();
        if (!s)
          return s.takeError();
        ss.push_back(*s);
      } while (consume(','));
      if (auto e = expect(']'))
        return e;
      return Attribute(ss);
    }
    Floats fs;
    Ints is;
    bool anyFloat = false;
    do {
      size_t at = (skipSpace(), pos_);
      bool isFloat;
      auto d = number(isFloat);
      if (!d)
        return d.takeError();
      anyFloat |= isFloat;
      fs.push_back(*d);
      if (!isFloat) {
        int64_t exact = 0;
        text_.slice(at, pos_).getAsInteger(10, exact);
        is.push_back(exact);
      }
    } while (consume(','));
    if (auto e = expect(']'))
      return e;
    return anyFloat ? Attribute(fs) : Attribute(is);
  }
  std::string w = peekWord();
  if (w == "tensor") {
    pos_ += w.size();
    auto t = tensorLiteral();
    if (!t)
      return t.takeError();
    return Attribute(*t);
  }
  if (auto dt = parseDType(w)) {
    pos_ += w.size();
    return Attribute(*dt);
  }
  size_t at = (skipSpace(), pos_);
  bool isFloat;
  auto d = number(isFloat);
  if (!d)
    return d.takeError();
  if (isFloat)
    return Attribute(*d);
  int64_t exact = 0;
  text_.slice(at, pos_).getAsInteger(10, exact);
  return Attribute(exact);
}

llvm::Expected<Attrs> Parser::attrList(char close) {
  Attrs attrs;
  if (consume(close))
    return attrs;
  do {
    size_t at = (skipSpace(), pos_);
    auto key = name("an attribute name");
    if (!key)
      return key.takeError();
    if (attrs.has(*key))
      return errorAt(at, "attribute '" + printable(*key) + "' given twice");
    if (auto e = expect('='))
      return e;
    auto value = attribute();
    if (!value)
      return value.takeError();
    attrs.set(*key, std::move(*value));
  } while (consume(','));
  if (auto e = expect(close))
    return e;
  return attrs;
}

llvm::Error Parser::variable(Module &m) {
  size_t at = (skipSpace(), pos_);
  Variable v;
  auto n = name("a variable name");
  if (!n)
    return n.takeError();
  v.name = *n;
  if (m.findVariable(v.name))
    return errorAt(at, "variable '" + printable(v.name) + "' declared twice");
  if (auto e = expect(':'))
    return e;
  auto t = type();
  if (!t)
    return t.takeError();
  v.type = *t;
  if (!v.type.isStatic())
    return errorAt(at, "variable '" + printable(v.name) + "' needs a static shape");
  size_t kindAt = (skipSpace(), pos_);
  std::string kind = peekWord();
  auto k = parseVarKind(kind);
  if (!k)
    return errorAt(kindAt, "expected param, state or slot, found '" + kind + "'");
  v.kind = *k;
  pos_ += kind.size();
  size_t initAt = (skipSpace(), pos_);
  auto fn = name("an initializer");
  if (!fn)
    return fn.takeError();
  if (*fn == "data") {
    auto data = hexTensor(v.type);
    if (!data)
      return data.takeError();
    v.data = std::move(*data);
  } else {
    v.init.fn = *fn;
    if (consume('(')) {
      do {
        bool isFloat;
        auto d = number(isFloat);
        if (!d)
          return d.takeError();
        v.init.args.push_back(*d);
      } while (consume(','));
      if (auto e = expect(')'))
        return e;
    }
    if (v.init.fn != "elided")
      if (auto e = checkInitializerArgs(v.init))
        return errorAt(initAt,
                       "variable '" + printable(v.name) + "': " + llvm::toString(std::move(e)));
  }
  if (consume('@')) {
    do {
      auto d = device();
      if (!d)
        return d.takeError();
      v.devices.push_back(*d);
    } while (consume(','));
    if (peekWord() == "sharded") { // each device holds a piece (Module.h)
      pos_ += llvm::StringRef("sharded").size();
      v.sharded = true;
    }
  }
  m.addVariable(std::move(v));
  return llvm::Error::success();
}

llvm::Expected<Value *> Parser::valueRef(Graph &g) {
  size_t at = (skipSpace(), pos_);
  if (!consume('%'))
    return error("expected a value such as %x");
  auto n = name("a value name");
  if (!n)
    return n.takeError();
  Value *v = g.findValue(*n);
  if (!v)
    return errorAt(at, "use of undefined value '%" + printable(*n) + "'");
  return v;
}

llvm::Error Parser::node(Graph &g) {
  size_t start = (skipSpace(), pos_);
  std::vector<std::string> resultNames;
  if (peek() == '%') {
    do {
      size_t at = (skipSpace(), pos_);
      if (!consume('%'))
        return error("expected a result such as %y");
      auto n = name("a result name");
      if (!n)
        return n.takeError();
      if (g.findValue(*n) || llvm::is_contained(resultNames, *n))
        return errorAt(at, "value '%" + printable(*n) + "' is defined twice");
      resultNames.push_back(*n);
    } while (consume(','));
    if (auto e = expect('='))
      return e;
  }
  size_t opAt = (skipSpace(), pos_);
  std::string opWord = peekWord();
  auto op = parseOp(opWord);
  if (!op)
    return errorAt(opAt, "unknown op '" + opWord + "'");
  pos_ += opWord.size();
  llvm::SmallVector<Value *, 4> operands;
  if (consume('(') && !consume(')')) {
    do {
      auto v = valueRef(g);
      if (!v)
        return v.takeError();
      operands.push_back(*v);
    } while (consume(','));
    if (auto e = expect(')'))
      return e;
  }
  Attrs attrs;
  if (consume('{')) {
    auto a = attrList('}');
    if (!a)
      return a.takeError();
    attrs = std::move(*a);
  }
  llvm::SmallVector<TensorType, 2> types;
  if (!resultNames.empty()) {
    if (auto e = expect(':'))
      return e;
    do {
      auto t = type();
      if (!t)
        return t.takeError();
      types.push_back(*t);
    } while (consume(','));
    if (types.size() != resultNames.size())
      return errorAt(opAt, llvm::Twine(resultNames.size()) + " results but " +
                               llvm::Twine(types.size()) + " types");
  }
  // Clauses.
  std::string nodeName, reason;
  std::optional<DeviceId> requested, assigned;
  int tower = -1;
  for (;;) {
    std::string w = peekWord();
    size_t at = pos_;
    if (w == "name" || w == "reason") {
      pos_ += w.size();
      auto s = quoted();
      if (!s)
        return s.takeError();
      (w == "name" ? nodeName : reason) = *s;
    } else if (w == "requested" || w == "device") {
      pos_ += w.size();
      auto d = device();
      if (!d)
        return d.takeError();
      (w == "requested" ? requested : assigned) = *d;
    } else if (w == "tower") {
      pos_ += w.size();
      auto t = integer();
      if (!t)
        return t.takeError();
      tower = (int)*t;
    } else {
      (void)at;
      break;
    }
  }
  if (nodeName.empty()) {
    if (resultNames.size() == 1) {
      nodeName = resultNames[0];
    } else if (!resultNames.empty() && llvm::StringRef(resultNames[0]).endswith(":0")) {
      nodeName = llvm::StringRef(resultNames[0]).drop_back(2).str();
    } else {
      return errorAt(start, "a node without a single result needs a name \"...\" clause");
    }
  }
  if (g.findNode(nodeName))
    return errorAt(start, "node '" + printable(nodeName) + "' is defined twice");
  Node *n =
      g.createNodeWithResultNames(*op, operands, types, resultNames, std::move(attrs), nodeName);
  n->setTower(tower);
  n->setRequestedDevice(requested);
  n->setAssignedDevice(assigned);
  n->setPlacementReason(reason);
  auto inferred = inferResultTypes(*n);
  if (!inferred)
    return errorAt(start, llvm::toString(inferred.takeError()));
  if (inferred->size() != types.size())
    return errorAt(start, "op " + opWord + " gives " + llvm::Twine(inferred->size()) +
                              " results, " + llvm::Twine(types.size()) + " are written");
  for (size_t i = 0; i < types.size(); ++i)
    if ((*inferred)[i] != types[i])
      return errorAt(start, "result '%" + printable(resultNames[i]) + "' is written " +
                                toString(types[i]) + " but its operands give " +
                                toString((*inferred)[i]));
  return llvm::Error::success();
}

llvm::Error Parser::graph(Module &m) {
  size_t at = (skipSpace(), pos_);
  auto n = name("a graph name");
  if (!n)
    return n.takeError();
  if (m.findGraph(*n))
    return errorAt(at, "graph '" + printable(*n) + "' defined twice");
  Graph &g = m.addGraph(*n);
  if (auto e = expect('{'))
    return e;
  while (peekWord() != "return") {
    if (atEnd() || peek() == '}')
      return error("expected 'return' at the end of graph '" + printable(*n) + "'");
    if (auto e = node(g))
      return e;
  }
  pos_ += 6;
  std::vector<Value *> outs;
  if (peek() == '%') {
    do {
      auto v = valueRef(g);
      if (!v)
        return v.takeError();
      outs.push_back(*v);
    } while (consume(','));
  }
  g.setOutputs(outs);
  return expect('}');
}

llvm::Expected<std::unique_ptr<Module>> Parser::parse() {
  if (peekWord() != "module")
    return error("expected 'module'");
  pos_ += 6;
  auto n = name("a module name");
  if (!n)
    return n.takeError();
  auto m = std::make_unique<Module>(*n);
  if (auto e = expect('{'))
    return e;
  Attrs meta;
  for (;;) {
    size_t at = (skipSpace(), pos_);
    std::string w = peekWord();
    if (w == "meta") {
      pos_ += w.size();
      // meta a = 1, b = 2   (ends at the next keyword)
      do {
        auto key = name("a meta key");
        if (!key)
          return key.takeError();
        if (auto e = expect('='))
          return e;
        auto v = attribute();
        if (!v)
          return v.takeError();
        meta.set(*key, std::move(*v));
      } while (consume(','));
    } else if (w == "var") {
      pos_ += w.size();
      if (auto e = variable(*m))
        return e;
    } else if (w == "graph") {
      pos_ += w.size();
      if (auto e = graph(*m))
        return e;
    } else if (consume('}')) {
      break;
    } else if (atEnd()) {
      return error("unexpected end of input: expected '}' to close the module");
    } else {
      return errorAt(at, "expected 'meta', 'var', 'graph' or '}', found '" +
                             printable(w.empty() ? std::string(1, peek()) : w) + "'");
    }
  }
  if (!atEnd())
    return error("unexpected text after the module");
  auto plan = PlanInfo::fromAttrs(meta);
  if (!plan)
    return withContext(plan.takeError(), file_);
  m->plan() = std::move(*plan);
  return m;
}

} // namespace

llvm::Expected<std::unique_ptr<Module>> parseModule(llvm::StringRef text,
                                                    llvm::StringRef filename) {
  auto m = Parser(text, filename).parse();
  if (!m)
    return oneLine(m.takeError());
  return m;
}

llvm::Expected<std::unique_ptr<Module>> parseModuleFile(llvm::StringRef path) {
  auto buf = readInputFile(path);
  if (!buf)
    return buf.takeError();
  return parseModule((*buf)->getBuffer(), path);
}

} // namespace graphc
