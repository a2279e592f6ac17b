// What the loader learns about an ONNX graph before it builds any layer: its one input, the
// output the loss reads (after the final operator the loss takes over), the nodes that output
// depends on, which tensors are per sample (computed from the input: their axis 0 is the
// batch) and which are static (initializers, constants and what is computed from them only),
// the role of every initializer, and the shapes ONNX's shape inference gives.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "loss.h"
#include "operator.h"

namespace tandem::onnx::detail {

enum class Role { kConstant, kParameter, kBuffer };

struct Analysis {
  const pb::GraphProto* graph = nullptr;
  std::string path;  // for messages
  int opset = 0;
  std::map<std::string, const pb::TensorProto*> initializers;
  std::string input;
  std::vector<int64_t> input_shape;  // without the batch axis; -1 where symbolic
  std::string output;                // what the loss reads
  bool taken_over = false;           // the loss took over the graph's final operator
  // Channels-last graphs (tf2onnx's Keras models): the Transpose to channels-first after the
  // input and the one back before the output, taken over (tandem feeds and reads [B,C,...]);
  // their node indices, -1 where there is none.
  int input_layout = -1, output_layout = -1;
  const LossEntry* loss = nullptr;
  std::vector<std::string> layer_names;  // per node
  std::vector<bool> needed;              // per node: the output depends on it
  std::set<std::string> batched;         // tensors computed per sample
  std::map<std::string, int> producer;   // tensor -> node
  std::map<std::string, Role> roles;     // initializers that are not constants
  std::map<std::string, Shape> shapes;   // inferred shapes, where known
  // How many needed nodes read each tensor (for the outputs a layer must keep).
  std::map<std::string, int> readers;

  const pb::NodeProto& node(int i) const { return graph->node(i); }
  Shape shape(const std::string& tensor) const;
};

// Throws tandem::Error for everything load() refuses about the graph as a whole.
Analysis analyze(const pb::ModelProto& model, const std::string& path, const std::string& loss,
                 const std::string& output);

}  // namespace tandem::onnx::detail
