// Trained weights back into the ONNX file: export_trained() replaces the initializers by the
// tensors of a state dict or checkpoint of the same names, and the written model loads with
// exactly those values (bitwise: float32 in, float32 out).
#include "tandem/onnx/export.h"

#include <filesystem>

#include "onnx_test_util.h"
#include "scratch.h"
#include "tandem/checkpoint/state_dict.h"
#include "tandem/onnx/load.h"

namespace tandem {
namespace {

std::map<std::string, torch::Tensor> tensors(const graph::Model& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& layer : model.layers) {
    for (const auto& [n, t] : graph::named_parameters(layer)) out[n] = t.detach().clone();
    for (const auto& [n, t] : graph::named_buffers(layer)) out[n] = t.detach().clone();
  }
  return out;
}

std::string temp(const std::string& name) {
  return tandem::testing::scratch_path("tandem_onnx_export_", name);
}

TEST(OnnxExport, WritesTheTrainedTensorsUnderTheInitializerNames) {
  onnx::LoadOptions o;
  const graph::Model model = onnx::load(testing::fixture("cnn_bn.onnx"), o);
  std::map<std::string, torch::Tensor> trained = tensors(model);
  for (auto& [name, t] : trained)
    if (t.is_floating_point()) t = t * 2 + 1;  // distinct from the file's values
  trained.at("bn.num_batches_tracked").fill_(7);
  checkpoint::save_state_dict_file(trained, temp("trained.pt"));
  EXPECT_EQ(onnx::export_trained(testing::fixture("cnn_bn.onnx"), temp("trained.pt"),
                                 temp("trained.onnx")),
            10);  // every initializer: weights, biases and both running statistics
  const std::map<std::string, torch::Tensor> back = tensors(onnx::load(temp("trained.onnx"), o));
  for (const auto& [name, t] : trained) {
    if (name == "bn.num_batches_tracked") continue;  // no initializer: starts at 0 again
    EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  }
}

TEST(OnnxExport, RefusesTheCheckpointOfAnotherModel) {
  std::map<std::string, torch::Tensor> other{{"dense0.weight", torch::zeros({2, 2})},
                                             {"dense0.bias", torch::zeros({2})}};
  checkpoint::save_state_dict_file(other, temp("other.pt"));
  try {
    onnx::export_trained(testing::fixture("mlp.onnx"), temp("other.pt"), temp("other.onnx"));
    FAIL() << "exported another model's weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no initializer for (dense0.bias, dense0.weight)"),
              std::string::npos)
        << e.what();
  }
  std::map<std::string, torch::Tensor> shape{{"net.1.weight", torch::zeros({3, 3})},
                                             {"net.1.bias", torch::zeros({16})}};
  checkpoint::save_state_dict_file(shape, temp("shape.pt"));
  EXPECT_THROW(
      onnx::export_trained(testing::fixture("mlp.onnx"), temp("shape.pt"), temp("shape.onnx")),
      Error);
}

}  // namespace
}  // namespace tandem
