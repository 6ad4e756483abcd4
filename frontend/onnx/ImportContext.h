//===- ImportContext.h - State shared by the ONNX import files --*- C++ -*-===//
//
// Internal to frontend/onnx. The Importer walks the ONNX graph in topological
// order and keeps, for every ONNX value name, a Slot saying what it stands
// for: a Value in our graph, contents known at import time (constants,
// integer initializers, shape data that may contain the symbolic batch), a
// module variable read on first use, or an output we do not model. Per-op
// import functions (OnnxOpImport*.cpp) see one node through a NodeContext.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/onnx/ImportOptions.h"

#include "ir/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <optional>

namespace graphc::onnxfe {

/// Contents known while importing. Integer elements may stand for the
/// symbolic batch size (from Shape of a value whose dimension is N).
struct Known {
  Tensor data;
  /// Empty, or one flag per element: the element is the batch symbol N.
  llvm::SmallVector<bool, 8> batch;
  /// A constant of an element type we do not handle (PyTorch writes Python
  /// floats as DOUBLE constants and casts them): its ONNX type and exact
  /// values; `data` then holds them as f32 for the shape. Only Cast and
  /// Identity accept it; anywhere else it is an error naming the type.
  int32_t foreignType = 0;
  std::vector<double> foreign;

  bool hasBatch() const { return llvm::is_contained(batch, true); }
  bool isBatch(int64_t i) const { return !batch.empty() && batch[i]; }
};

/// What an ONNX value name stands for.
struct Slot {
  Value *value = nullptr;
  std::shared_ptr<const Known> known;
  /// `known` may be folded through ops (constants, integer initializers);
  /// float initializers are known only for reads at import time (Clip's min).
  bool foldable = false;
  /// A module variable, read through a Variable node on first data use.
  std::string variable;
  /// The name a Constant node made from `known` gets.
  std::string origin;
  /// `known` holds however the value is read: nothing materialised it, or it
  /// became a Constant node (a data use before a shape use reads it).
  bool knownAtImport() const {
    return known && (!value || value->producer()->op() == Op::Constant);
  }
  /// Non-empty: an output graphc does not model, and why.
  std::string dropped;
  std::string producer; ///< the ONNX node (scope form) for messages
};

class Importer;

/// Import functions read one ONNX node through this.
class NodeContext {
public:
  NodeContext(Importer &imp, const onnx::NodeProto &node, std::string name)
      : imp_(imp), node_(node), name_(std::move(name)) {}

  const onnx::NodeProto &proto() const { return node_; }
  /// The node's name in scope form, before it is made unique.
  const std::string &name() const { return name_; }
  llvm::StringRef opType() const { return node_.op_type(); }
  int64_t opset() const;
  Importer &importer() { return imp_; }

  //===-- Inputs ------------------------------------------------------------===//
  /// Inputs up to the last non-empty name.
  unsigned numInputs() const;
  bool hasInput(unsigned i) const { return i < numInputs() && !node_.input(i).empty(); }
  llvm::StringRef inputName(unsigned i) const { return node_.input(i); }
  /// Input i as a graph value (materialising constants and variable reads).
  llvm::Expected<Value *> input(unsigned i);
  llvm::Expected<TensorType> inputType(unsigned i) const;
  /// Known contents of input i, or null.
  const Known *known(unsigned i) const;
  /// Input i as constant integers (an error naming `what` when it is not
  /// known at import time or depends on the batch).
  llvm::Expected<Ints> constInts(unsigned i, llvm::StringRef what) const;
  /// Input i as one constant number.
  llvm::Expected<double> constScalar(unsigned i, llvm::StringRef what) const;

  //===-- Attributes --------------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t dflt) const;
  double getFloat(llvm::StringRef name, double dflt) const;
  std::string getString(llvm::StringRef name, llvm::StringRef dflt = "") const;
  std::optional<Ints> getInts(llvm::StringRef name) const;
  /// An integer list given as attribute `name` (older opsets) or as input
  /// `input` (newer ones); nullopt when neither is there.
  llvm::Expected<std::optional<Ints>> intsFromAttrOrInput(llvm::StringRef name,
                                                          unsigned input) const;

  //===-- Results -----------------------------------------------------------===//
  /// Creates our node (named after the ONNX node, unique in the graph) and
  /// binds its results to the ONNX outputs in order. Shape errors name this
  /// node and the producers of its operands.
  llvm::Expected<Node *> emit(Op op, llvm::ArrayRef<Value *> operands, Attrs attrs = {});
  void bindValue(unsigned out, Value *v);
  void bindKnown(unsigned out, Known k);
  /// Output `out` reads module variable `var` (an Identity of a weight).
  void bindVariable(unsigned out, llvm::StringRef var);
  /// Marks output `out` as not modelled; a later use is an error saying why.
  void drop(unsigned out, llvm::StringRef why);

  /// "node 'name' (OpType, opset N): msg".
  llvm::Error fail(const llvm::Twine &msg) const;
  /// fail() for what only a bound batch allows, `msg` saying why; it adds
  /// how to bind one. The import can then run again with
  /// ImportOptions::batchIfNeeded bound (Importer::batchNeeded).
  llvm::Error failNeedsBatch(const llvm::Twine &msg) const;
  /// The "node 'name' (OpType, opset N)" prefix.
  std::string describe() const;

private:
  Importer &imp_;
  const onnx::NodeProto &node_;
  std::string name_;
};

/// One ONNX op the importer maps onto ours.
using ImportFn = llvm::Error (*)(NodeContext &);
struct OpRule {
  llvm::StringLiteral opType;
  ImportFn fn;
  /// Bit i: input i is read at import time (a shape, axes, a bound), never
  /// as a runtime tensor, so an initializer there is no variable.
  unsigned constInputs = 0;
};

llvm::ArrayRef<OpRule> elementwiseRules();
llvm::ArrayRef<OpRule> nnRules();
llvm::ArrayRef<OpRule> shapeRules();
llvm::ArrayRef<OpRule> recurrentRules();
/// The rule for an op type of the default domain, or null.
const OpRule *findRule(llvm::StringRef opType);

/// Folds the node when its results are known at import time (Constant,
/// Shape, and shape arithmetic on known inputs); false when it is not
/// foldable and must become a graph node. ShapeFolding.cpp.
llvm::Expected<bool> tryFold(NodeContext &ctx);
/// Whether `opType` is folded whatever its inputs (its inputs are then never
/// runtime data): Constant, Shape, Size, ConstantOfShape.
bool alwaysFolded(llvm::StringRef opType);

/// A Reshape target (ONNX semantics: 0 copies, -1 infers, elements may be
/// the batch symbol) resolved against the input's shape. ShapeFolding.cpp.
llvm::Expected<Dims> resolveReshape(const NodeContext &ctx, llvm::ArrayRef<int64_t> input,
                                    const Known &shape, bool allowZero);

/// The double with the shortest decimal form that rounds to `f`: ONNX keeps
/// float attributes as float32, and 0.9f reads better, and subtracts from 1
/// closer to what the model's author wrote, as 0.9 than as 0.899999976.
double shortestDecimal(float f);

/// Normalises a possibly negative axis against `rank` (error if outside).
llvm::Expected<int64_t> normalizeAxis(const NodeContext &ctx, int64_t axis, int64_t rank);

//===-- Stochastic depth (StochasticDepth.cpp) -----------------------------===//

/// How a stochastic-depth chain makes its 0/1 noise from the draw.
enum class NoiseForm : unsigned char {
  Less,      ///< Cast(draw < keep)
  Floor,     ///< Floor(keep + draw)
  Bernoulli, ///< Bernoulli(P), P all keep
};

/// One chain random op -> ... -> Div(noise, keep) -> Mul(x, noise), matched
/// on the ONNX graph; the Mul imports as a per-sample Dropout.
struct StochasticDepth {
  NoiseForm form = NoiseForm::Less;
  const onnx::NodeProto *random = nullptr;
  /// The ConstantOfShape or Expand the draw takes its shape (Bernoulli its
  /// probability) from, when only the chain reads it; else null.
  const onnx::NodeProto *source = nullptr;
  const onnx::NodeProto *keepOp = nullptr;             ///< Less or Add; null for Bernoulli
  llvm::SmallVector<const onnx::NodeProto *, 2> parts; ///< Cast, Floor
  const onnx::NodeProto *div = nullptr;
  const onnx::NodeProto *mul = nullptr;
  unsigned xSlot = 0; ///< the Mul's input that is x
};

struct StochasticDepthScan {
  std::vector<StochasticDepth> patterns;
  /// Every node of a chain but its Mul -> its pattern; the import skips them.
  llvm::DenseMap<const onnx::NodeProto *, unsigned> absorbed;
  /// The chains' Muls -> their patterns.
  llvm::DenseMap<const onnx::NodeProto *, unsigned> muls;
  /// Random ops in no chain, and why.
  llvm::DenseMap<const onnx::NodeProto *, std::string> refused;
};

/// The ops that draw random numbers (RandomUniform[Like], RandomNormal[Like],
/// Bernoulli, Multinomial).
bool isRandomOp(llvm::StringRef opType);
/// What a random op outside a chain is told: the forms graphc imports.
extern const char *const kStochasticDepthForms;
/// The node that writes each value of the graph.
using Producers = llvm::StringMap<const onnx::NodeProto *>;
/// Matches every chain of the graph (structure only: op types and single
/// readers); `order` is the topological order.
StochasticDepthScan findStochasticDepth(const onnx::GraphProto &g,
                                        llvm::ArrayRef<const onnx::NodeProto *> order,
                                        const Producers &producers);
/// Imports the chain's Mul (ctx) as Dropout {ratio = 1 - keep, training,
/// mask}, checking keep, the divisor and the noise's shape.
llvm::Error importStochasticDepth(NodeContext &ctx, const StochasticDepth &sd);

class Importer {
public:
  Importer(const onnx::ModelProto &model, const ImportOptions &opts, std::string source,
           std::string baseDir);
  llvm::Expected<std::unique_ptr<Module>> run();

  int64_t opset() const { return opset_; }
  /// The version the model imports of another domain (0: none).
  int64_t domainOpset(llvm::StringRef domain) const;
  Graph &graph() { return *graph_; }
  Module &module() { return *module_; }
  /// The batch dimension as shapes carry it: the bound size, or kBatchDim.
  int64_t batchDim() const { return opts_.batch > 0 ? opts_.batch : kBatchDim; }

  Slot *slot(llvm::StringRef name);
  Slot *slotFor(llvm::StringRef name) { return &slots_[name]; }
  const Slot *slot(llvm::StringRef name) const;
  /// The ONNX node that writes value `name`, or null (an input, an initializer).
  const onnx::NodeProto *producerOf(llvm::StringRef name) const;
  llvm::Expected<Value *> materialize(llvm::StringRef name, llvm::StringRef who);
  llvm::Expected<TensorType> typeOf(llvm::StringRef name, llvm::StringRef who) const;
  /// A variable copying `from` (an initializer or variable) under `name`:
  /// PyTorch's exporter shares equal initializers through Identity nodes,
  /// which we undo so each consumer keeps its own parameter.
  llvm::Expected<std::string> aliasVariable(llvm::StringRef from, llvm::StringRef name,
                                            llvm::StringRef who);
  /// A node name from `base`, unique in the graph and not taken by a graph
  /// output name unless `mayUse` is that output.
  std::string uniqueName(llvm::StringRef base, llvm::StringRef mayUse = "") const;
  bool isGraphOutput(llvm::StringRef name) const { return outputNames_.contains(name); }
  /// Whether some node reads `name` as runtime data (not at import time).
  bool isDataUse(llvm::StringRef name) const { return dataUses_.contains(name); }
  /// Whether some node reads `name` at all, or it is a graph output.
  bool isRead(llvm::StringRef name) const { return uses_.count(name) || isGraphOutput(name); }
  /// Records that the import stopped where the symbolic batch must be bound.
  void needBatch() { batchNeeded_ = true; }
  bool batchNeeded() const { return batchNeeded_; }

private:
  struct Use {
    const onnx::NodeProto *node;
    unsigned slot;
  };

  llvm::Error checkModel();
  llvm::Error sortNodes();
  llvm::Error checkOps();
  void scanUses();
  llvm::Error createInputs();
  llvm::Error createVariables();
  /// A one-element float initializer that is a constant, not a parameter to
  /// train: a non-finite one (an attention mask's -inf fill), one an exporter
  /// named (PyTorch 2's dynamo exporter and tf2onnx write their constants as
  /// initializers: an attention's scale), or one read only by Adds whose sums
  /// only Sqrt reads (a normalisation's epsilon). Trained, such a constant
  /// leaves the model's domain within steps (NaN).
  bool isConstantScalar(llvm::StringRef name, const Tensor &data) const;
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error bindOutputs();
  llvm::Expected<Initializer> defaultInitializer(llvm::StringRef name, const TensorType &type);
  std::optional<TensorType> declaredType(llvm::StringRef name) const;

  const onnx::ModelProto &model_;
  const onnx::GraphProto &g_;
  ImportOptions opts_;
  std::string source_, baseDir_;
  int64_t opset_ = 0;
  std::unique_ptr<Module> module_;
  Graph *graph_ = nullptr;

  std::vector<const onnx::NodeProto *> order_;
  Producers producers_;
  llvm::StringMap<Slot> slots_;
  llvm::StringSet<> outputNames_;
  llvm::StringMap<const onnx::TensorProto *> initializers_;
  llvm::StringMap<const onnx::ValueInfoProto *> inputs_;
  llvm::StringMap<std::vector<Use>> uses_;
  llvm::StringSet<> dataUses_, stateNames_;
  std::vector<std::string> weightInputs_;
  bool batchNeeded_ = false;
  int64_t fixedBatch_ = 0; ///< the batch of a model without a dynamic one
  Strings exporterFolded_; ///< PlanInfo::exporterFolded
  StochasticDepthScan stochasticDepth_;
};

/// The end of a message about a symbolic batch the import cannot keep.
extern const char *const kBindBatchHint;

/// Parses a ModelProto and imports it; `source` names it in messages and
/// `baseDir` is where external data lives (empty: none may be used).
llvm::Expected<std::unique_ptr<Module>> importOnnx(llvm::StringRef bytes, const ImportOptions &opts,
                                                   llvm::StringRef source, llvm::StringRef baseDir);

/// Scope form of an ONNX node name: "/Mixed_5b/Conv" -> "Mixed_5b/Conv";
/// an unnamed node is named after its op type.
std::string scopeName(const onnx::NodeProto &node);

} // namespace graphc::onnxfe
