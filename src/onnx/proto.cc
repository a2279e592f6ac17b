#include "proto.h"

#include <cstring>
#include <fstream>

#include "common/output_path.h"
#include "tandem/common/check.h"

namespace tandem::onnx::detail {

torch::ScalarType scalar_type(int data_type, const std::string& what) {
  switch (data_type) {
    case pb::TensorProto::FLOAT:
      return torch::kFloat32;
    case pb::TensorProto::DOUBLE:
      return torch::kFloat64;
    case pb::TensorProto::INT64:
      return torch::kInt64;
    case pb::TensorProto::INT32:
      return torch::kInt32;
    case pb::TensorProto::INT16:
      return torch::kInt16;
    case pb::TensorProto::INT8:
      return torch::kInt8;
    case pb::TensorProto::UINT8:
      return torch::kUInt8;
    case pb::TensorProto::BOOL:
      return torch::kBool;
    default:
      TANDEM_CHECK(false,
                   "{} has element type {}; tandem reads FLOAT, DOUBLE, INT8/16/32/64, UINT8 and "
                   "BOOL tensors",
                   what, type_name(data_type));
  }
}

namespace {

// Copies a repeated field into a tensor of `type` (the field's own C++ type first).
template <typename Field>
torch::Tensor from_field(const Field& field, torch::ScalarType field_type, torch::ScalarType type,
                         const std::vector<int64_t>& dims) {
  torch::Tensor t = torch::empty({field.size()}, torch::TensorOptions().dtype(field_type));
  if (field.size() > 0)
    std::memcpy(t.data_ptr(), field.data(), static_cast<size_t>(field.size()) * t.element_size());
  return t.to(type).reshape(dims);
}

}  // namespace

std::string type_name(int data_type) {
  if (pb::TensorProto::DataType_IsValid(data_type))
    return pb::TensorProto::DataType_Name(static_cast<pb::TensorProto::DataType>(data_type));
  return fmt::format("{} (unknown)", data_type);
}

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

pb::ModelProto read_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), "cannot open the ONNX model '{}': {}", path, std::strerror(errno));
  pb::ModelProto model;
  TANDEM_CHECK(model.ParseFromIstream(&in),
               "'{}' is not an ONNX model (protobuf ModelProto); export one with "
               "torch.onnx.export or tf2onnx",
               path);
  TANDEM_CHECK(model.has_graph() && model.graph().node_size() > 0,
               "the ONNX model '{}' has no graph nodes", path);
  for (const auto& t : model.graph().initializer()) {
    TANDEM_CHECK(t.data_location() != pb::TensorProto::EXTERNAL,
                 "the ONNX model '{}' keeps initializer '{}' in an external file; tandem reads one "
                 "self-contained file: save it with onnx.save(model, path, "
                 "save_as_external_data=False)",
                 path, t.name());
  }
  return model;
}

void write_model_file(const pb::ModelProto& model, const std::string& path) {
  std::string bytes;
  TANDEM_CHECK(model.SerializeToString(&bytes), "cannot serialize the ONNX model for '{}'", path);
  write_output_file(path, bytes);
}

int default_opset(const pb::ModelProto& model, const std::string& path) {
  int opset = -1;
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) opset = static_cast<int>(o.version());
  TANDEM_CHECK(opset >= 0, "the ONNX model '{}' imports no opset of the default domain", path);
  TANDEM_CHECK(opset >= kMinOpset && opset <= kMaxOpset,
               "the ONNX model '{}' uses opset {}; tandem reads opsets {} to {}: export with "
               "opset_version={} (torch.onnx.export, tf2onnx --opset), or convert it with "
               "onnx.version_converter.convert_version(model, {})",
               path, opset, kMinOpset, kMaxOpset, 13, 13);
  return opset;
}

torch::Tensor to_tensor(const pb::TensorProto& proto, const std::string& what) {
  TANDEM_CHECK(proto.data_location() != pb::TensorProto::EXTERNAL,
               "{} is stored in an external file; tandem reads self-contained models", what);
  const torch::ScalarType type = scalar_type(proto.data_type(), what);
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  torch::Tensor t;
  if (proto.has_raw_data()) {
    t = torch::empty(dims, torch::TensorOptions().dtype(type));
    const std::string& raw = proto.raw_data();
    TANDEM_CHECK(raw.size() == static_cast<size_t>(count) * t.element_size(),
                 "{} holds {} bytes, but its shape [{}] of {} needs {}", what, raw.size(),
                 fmt::join(dims, ","), type_name(proto.data_type()), count * t.element_size());
    if (count > 0) std::memcpy(t.data_ptr(), raw.data(), raw.size());  // little-endian host
  } else {
    switch (proto.data_type()) {
      case pb::TensorProto::FLOAT:
        t = from_field(proto.float_data(), torch::kFloat32, type, dims);
        break;
      case pb::TensorProto::DOUBLE:
        t = from_field(proto.double_data(), torch::kFloat64, type, dims);
        break;
      case pb::TensorProto::INT64:
        t = from_field(proto.int64_data(), torch::kInt64, type, dims);
        break;
      default:  // int32, int16, int8, uint8 and bool travel in int32_data
        t = from_field(proto.int32_data(), torch::kInt32, type, dims);
        break;
    }
  }
  TANDEM_CHECK(t.numel() == count, "{} holds {} values, but its shape [{}] needs {}", what,
               t.numel(), fmt::join(dims, ","), count);
  return t;
}

void set_values(pb::TensorProto* proto, const torch::Tensor& values) {
  const std::string what = fmt::format("initializer '{}'", proto->name());
  const torch::ScalarType type = scalar_type(proto->data_type(), what);
  int64_t count = 1;
  for (int64_t d : proto->dims()) count *= d;
  TANDEM_ASSERT(values.numel() == count, "{}: {} values for {} elements", what, values.numel(),
                count);
  const torch::Tensor t = values.detach().to(torch::kCPU, type).contiguous();
  proto->clear_float_data();
  proto->clear_double_data();
  proto->clear_int32_data();
  proto->clear_int64_data();
  proto->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()),
                                  static_cast<size_t>(t.numel()) * t.element_size()));
}

}  // namespace tandem::onnx::detail
