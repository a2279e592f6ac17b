// What load() refuses, each with a message that names the node, its operator and what to do
// (the command line exits with status 2 on these: tests/onnx/onnx_tests.cmake).
#include "onnx_test_util.h"
#include "tandem/onnx/load.h"

namespace tandem {
namespace {

// The message of the error load() throws for refused/<name>.onnx, or "" when it loads.
std::string refusal(const std::string& name, const std::string& loss = "mse",
                    const std::string& output = "") {
  onnx::LoadOptions o;
  o.loss = loss;
  o.output = output;
  try {
    onnx::load(testing::fixture("refused/" + name + ".onnx"), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refusal(const std::string& name, const std::vector<std::string>& parts,
                    const std::string& loss = "mse", const std::string& output = "") {
  const std::string what = refusal(name, loss, output);
  ASSERT_FALSE(what.empty()) << name << " was loaded";
  for (const auto& part : parts) EXPECT_NE(what.find(part), std::string::npos) << what;
}

TEST(OnnxRefused, UnsupportedOperatorNamesNodeOperatorAndTheSupportedOnes) {
  expect_refusal(
      "unsupported_operator",
      {"ONNX node 'hardmax0' uses operator 'Hardmax', which tandem does not run",
       "tandem runs Add, AveragePool, BatchNormalization,", "Upsample (opsets 11 to 17)"});
  expect_refusal("custom_domain", {"'gelu0' uses operator 'Gelu' of domain 'com.example'"});
  // Every node tandem does not run, in one message.
  expect_refusal(
      "two_unsupported_operators",
      {"ONNX node 'hardmax0' uses operator 'Hardmax', node 'gelu0' uses operator 'Gelu' of "
       "domain 'com.example' (2 nodes), which tandem does not run"});
}

TEST(OnnxRefused, SecondGraphInput) {
  expect_refusal("second_input", {"has 2 graph inputs (x, x2)", "a second graph input 'x2'"});
}

TEST(OnnxRefused, DynamicShapes) {
  expect_refusal("reshape_fixed_batch",
                 {"ONNX node 'flat' (Reshape)", "fixes axis 0, the batch, to 2"});
  // PyTorch's x.view(x.size(0), -1): the Shape operator is named.
  expect_refusal("batch_size_arithmetic",
                 {"ONNX node 'double_batch' (Mul): it computes with the batch size ('b' holds it"});
  expect_refusal("reshape_by_batched_tensor",
                 {"ONNX node 'reshape' (Reshape)", "a dynamic shape tandem cannot resolve"});
}

TEST(OnnxRefused, AxesThatMoveTheBatch) {
  expect_refusal("transpose_batch", {"ONNX node 'swap' (Transpose)", "moves the batch axis"});
  expect_refusal("flatten_axis0", {"ONNX node 'flat0' (Flatten)", "axis 0"});
  expect_refusal("concat_batch_axis", {"ONNX node 'cat0' (Concat)", "the batch axis"});
  expect_refusal("softmax_batch_axis", {"ONNX node 'soft0' (Softmax)", "the batch axis"});
  expect_refusal("unsqueeze_batch_axis", {"ONNX node 'unsq0' (Unsqueeze)", "the batch axis"});
}

TEST(OnnxRefused, OpsetsOutsideElevenToSeventeen) {
  expect_refusal("opset_10", {"uses opset 10; tandem reads opsets 11 to 17"});
  expect_refusal("opset_18", {"uses opset 18; tandem reads opsets 11 to 17"});
}

TEST(OnnxRefused, TiedWeights) {
  expect_refusal("tied_weights", {"initializer 'w' is used by ONNX nodes 'first' and 'second'",
                                  "tied weights are not supported"});
}

TEST(OnnxRefused, OutputsTandemDoesNotCompute) {
  expect_refusal("batchnorm_statistics_read",
                 {"ONNX node 'bn' (BatchNormalization)", "its output 1 ('mean_out') is read"});
  expect_refusal("maxpool_indices_read", {"ONNX node 'pool' (MaxPool)", "its output 1 ('i')"});
}

TEST(OnnxRefused, OutputsAndLosses) {
  expect_refusal("two_outputs",
                 {"has 2 outputs (a, b); name the one the loss reads with LoadOptions::output"});
  EXPECT_EQ(refusal("two_outputs", "mse", "b"), "");
  expect_refusal("two_outputs", {"LoadOptions::output = c: ", "its outputs are a, b"}, "mse", "c");
  expect_refusal("two_outputs",
                 {"LoadOptions::loss = hinge is unknown; use cross-entropy, dice, dice+bce, mse"},
                 "hinge", "a");
  expect_refusal("softmax_not_over_classes",
                 {"ends in Softmax node 'soft2' over axis 2", "needs the class scores on axis 1"},
                 "cross-entropy");
}

TEST(OnnxRefused, TypesAndFiles) {
  expect_refusal("double_weights", {"initializer 'w'", "DOUBLE", "export the model in float32"});
  expect_refusal("integer_input", {"has element type INT64; tandem feeds FLOAT"});
  expect_refusal("not_onnx", {"is not an ONNX model"});
  expect_refusal("external_data", {"keeps initializer 'w' in an external file"});
  expect_refusal("no_such_file", {"cannot open the ONNX model"});
}

}  // namespace
}  // namespace tandem
