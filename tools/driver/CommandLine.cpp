#include "tools/driver/CommandLine.h"

#include "llvm/Support/raw_ostream.h"

namespace graphc {

namespace {

/// CLI11's type names of signed and unsigned whole-number options.
constexpr llvm::StringLiteral kSigned = "INT", kUnsigned = "UINT";

/// Checks a whole number and writes it back without leading zeros, which
/// CLI11's conversion (strtoll, base 0) would read as octal.
CLI::Validator wholeNumber(bool isUnsigned) {
  auto check = [isUnsigned](std::string &text) -> std::string {
    llvm::StringRef s(text);
    bool bad;
    std::string normal;
    if (isUnsigned) {
      uint64_t v;
      bad = s.startswith("-") || s.getAsInteger(10, v);
      normal = bad ? "" : std::to_string(v);
    } else {
      int64_t v;
      bad = s.getAsInteger(10, v);
      normal = bad ? "" : std::to_string(v);
    }
    if (bad)
      return "'" + text + "' is not a whole number from " +
             (isUnsigned ? "0 to 18446744073709551615" : "-2^63 to 2^63-1");
    text = normal;
    return "";
  };
  // No description: the help shows the type name alone, as before.
  return CLI::Validator(check, "");
}

/// Every whole-number option of `app` and its subcommands takes decimal
/// digits within its range (see the file comment).
void checkWholeNumbers(CLI::App &app) {
  for (CLI::Option *o : app.get_options()) {
    if (o->get_type_size() == 0)
      continue; // a flag
    std::string type = o->get_type_name();
    if (type == kSigned || type == kUnsigned)
      o->transform(wholeNumber(type == kUnsigned));
  }
  for (CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; }))
    checkWholeNumbers(*sub);
}

} // namespace

std::optional<int> parseCommandLine(CLI::App &app, int argc, char **argv, llvm::StringRef tool) {
  checkWholeNumbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return app.exit(e); // --help
    llvm::errs() << tool << ": error: " << e.what() << "\n";
    return 1;
  }
  return std::nullopt;
}

int finishOutput(int status, llvm::StringRef tool) {
  llvm::raw_fd_ostream &out = llvm::outs();
  out.flush();
  if (!out.has_error())
    return status;
  std::error_code ec = out.error();
  out.clear_error(); // reported here, not again when the stream is destroyed
  llvm::errs() << tool << ": error: cannot write the standard output: " << ec.message() << "\n";
  return status ? status : 1;
}

} // namespace graphc
