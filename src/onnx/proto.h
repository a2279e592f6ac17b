// Reading and writing ONNX files through Debian's ONNX library (libonnx-dev: the protobuf
// classes of onnx.proto), and converting its TensorProto to and from LibTorch tensors.
// Internal to the onnx part: the public headers never expose protobuf types.
#pragma once

#include <onnx/onnx_pb.h>
#include <torch/types.h>

#include <string>

namespace tandem::onnx::detail {

namespace pb = ::onnx;

// The opsets of the default domain ("" or "ai.onnx") tandem reads.
inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 17;

// Parses `path`. Throws tandem::Error naming the file when it is missing, is not an ONNX model,
// or keeps tensors in external files (tandem reads one self-contained file).
pb::ModelProto read_model_file(const std::string& path);

// Writes `model` to `path`, replacing it atomically.
void write_model_file(const pb::ModelProto& model, const std::string& path);

// The opset of the default domain; throws tandem::Error outside [kMinOpset, kMaxOpset].
int default_opset(const pb::ModelProto& model, const std::string& path);

// The domain of the standard operators.
bool is_default_domain(const std::string& domain);

// LibTorch's type for an ONNX element type; throws tandem::Error naming `what` for others.
torch::ScalarType scalar_type(int data_type, const std::string& what);

// A CPU tensor holding a copy of `proto`'s values (float, double, int8/16/32/64, uint8, bool).
// `what` names the tensor in errors (an initializer, a Constant node's value).
torch::Tensor to_tensor(const pb::TensorProto& proto, const std::string& what);

// Replaces the values of `proto` by those of `t` (same number of elements), in `proto`'s data
// type, as little-endian raw_data. Dims are kept; `t` is converted to that type.
void set_values(pb::TensorProto* proto, const torch::Tensor& t);

// "FLOAT", "INT64", ...: the name of an ONNX element type, for messages.
std::string type_name(int data_type);

}  // namespace tandem::onnx::detail
