#include "checkpoint/optimizer_state.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <sstream>
#include <type_traits>

#include "tandem/common/check.h"

namespace tandem::checkpoint {
namespace {

// LibTorch 1.x keys Optimizer::state() by the TensorImpl address printed as a string
// (c10::guts::to_string), 2.x by the address itself; the map's key type says which.
template <typename Map>
typename Map::key_type state_key(const Map&, const torch::Tensor& p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream os;
    os << static_cast<void*>(p.unsafeGetTensorImpl());
    return os.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

bool holds(const torch::optim::Optimizer& opt, const torch::Tensor& p) {
  for (const auto& group : opt.param_groups()) {
    for (const auto& q : group.params()) {
      if (q.unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) return true;
    }
  }
  return false;
}

torch::Tensor saved_copy(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

// Adam and AdamW keep the same fields under different types.
template <typename State>
ParamState export_adam(const State& s) {
  ParamState out;
  out["step"] = torch::tensor(static_cast<int64_t>(s.step()), torch::kInt64).reshape({});
  out["exp_avg"] = saved_copy(s.exp_avg());
  out["exp_avg_sq"] = saved_copy(s.exp_avg_sq());
  if (s.max_exp_avg_sq().defined()) out["max_exp_avg_sq"] = saved_copy(s.max_exp_avg_sq());
  return out;
}

const torch::Tensor& field(const ParamState& s, const std::string& name,
                           const std::string& field_name, const torch::Tensor& p,
                           bool required = true) {
  static const torch::Tensor none;
  auto it = s.find(field_name);
  if (it == s.end()) {
    TANDEM_CHECK(!required,
                 "the saved optimizer state of '{}' has no '{}' (it has: {}); the checkpoint was "
                 "saved with another optimizer than this one",
                 name, field_name, [&] {
                   std::vector<std::string> keys;
                   for (const auto& [k, v] : s) keys.push_back(k);
                   return fmt::format("{}", fmt::join(keys, ", "));
                 }());
    return none;
  }
  if (field_name != "step") {
    TANDEM_CHECK(it->second.sizes() == p.sizes(),
                 "the saved optimizer state '{}' of '{}' has shape [{}] but the parameter has [{}]",
                 field_name, name, fmt::join(it->second.sizes(), ", "), fmt::join(p.sizes(), ", "));
  }
  return it->second;
}

// A copy of `t` on the parameter's device with its dtype. A copy to a GPU from pageable host
// memory is complete when it returns (non_blocking=false), so the device's own stream cannot
// read it early.
torch::Tensor on_device(const torch::Tensor& t, const torch::Tensor& p) {
  return t.to(p.device(), p.scalar_type(), /*non_blocking=*/false, /*copy=*/true).contiguous();
}

template <typename State>
std::unique_ptr<State> import_adam(const std::string& name, const ParamState& s,
                                   const torch::Tensor& p) {
  auto st = std::make_unique<State>();
  using Step = std::decay_t<decltype(st->step())>;
  static_assert(std::is_arithmetic_v<Step>, "Adam's step is a number in every supported LibTorch");
  st->step(static_cast<Step>(field(s, name, "step", p).template item<int64_t>()));
  st->exp_avg(on_device(field(s, name, "exp_avg", p), p));
  st->exp_avg_sq(on_device(field(s, name, "exp_avg_sq", p), p));
  const torch::Tensor& m = field(s, name, "max_exp_avg_sq", p, /*required=*/false);
  if (m.defined()) st->max_exp_avg_sq(on_device(m, p));
  return st;
}

}  // namespace

std::string optimizer_kind(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer)) return "adam";
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer)) return "adamw";
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer)) return "sgd";
  TANDEM_CHECK(false,
               "checkpoints hold the state of Adam, AdamW and SGD optimizers only, not of this "
               "one; use one of those, or save without an optimizer");
}

std::map<std::string, ParamState> export_state(const torch::optim::Optimizer& optimizer,
                                               const NamedTensors& params) {
  const std::string kind = optimizer_kind(optimizer);
  const auto& states = optimizer.state();
  std::map<std::string, ParamState> out;
  for (const auto& [name, p] : params) {
    TANDEM_ASSERT(holds(optimizer, p), "parameter '{}' is not held by its stage's optimizer", name);
    auto it = states.find(state_key(states, p));
    if (it == states.end()) continue;  // not stepped yet
    if (kind == "adam") {
      out[name] = export_adam(static_cast<const torch::optim::AdamParamState&>(*it->second));
    } else if (kind == "adamw") {
      out[name] = export_adam(static_cast<const torch::optim::AdamWParamState&>(*it->second));
    } else {
      const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
      if (s.momentum_buffer().defined())
        out[name]["momentum_buffer"] = saved_copy(s.momentum_buffer());
    }
  }
  return out;
}

void import_state(torch::optim::Optimizer& optimizer, const NamedTensors& params,
                  const std::map<std::string, ParamState>& states) {
  const std::string kind = optimizer_kind(optimizer);
  auto& map = optimizer.state();
  for (const auto& [name, p] : params) {
    TANDEM_ASSERT(holds(optimizer, p), "parameter '{}' is not held by its stage's optimizer", name);
    const auto key = state_key(map, p);
    map.erase(key);
    auto it = states.find(name);
    if (it == states.end()) continue;
    torch::NoGradGuard no_grad;
    if (kind == "adam") {
      map[key] = import_adam<torch::optim::AdamParamState>(name, it->second, p);
    } else if (kind == "adamw") {
      map[key] = import_adam<torch::optim::AdamWParamState>(name, it->second, p);
    } else {
      auto st = std::make_unique<torch::optim::SGDParamState>();
      st->momentum_buffer(on_device(field(it->second, name, "momentum_buffer", p), p));
      map[key] = std::move(st);
    }
  }
}

}  // namespace tandem::checkpoint
