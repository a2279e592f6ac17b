// Layers over torch::nn modules whose forward takes several tensors or returns several: a
// residual block fed by the previous block and a skip, a decoder level that takes the
// up-sampled tensor and the encoder's output, a head with two outputs.
//
//   struct UpImpl : torch::nn::Cloneable<UpImpl> {
//     torch::Tensor forward(torch::Tensor below, torch::Tensor skip);
//     ...
//   };
//   TORCH_MODULE(Up);
//   model.layers.push_back(graph::make_layer("up1", Up(...), {"dec2", "enc1"}, {"dec1"}));
//
// The forward's arguments are the layer's inputs in order; its result is one tensor, a
// std::tuple of tensors, or a std::vector of them (as many as the layer's outputs). Modules
// that derive from torch::nn::Cloneable can be copied for another device (a spatial split in
// one process); others train everywhere else.
#pragma once

#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tandem/common/check.h"
#include "tandem/graph/layer.h"

namespace tandem::graph {

namespace module_layer_detail {

// The arity and result of a module's forward (one overload; a template forward has none).
template <typename T>
struct Forward;
template <typename C, typename R, typename... A>
struct Forward<R (C::*)(A...)> {
  static constexpr size_t arity = sizeof...(A);
  using Result = R;
};
template <typename C, typename R, typename... A>
struct Forward<R (C::*)(A...) const> : Forward<R (C::*)(A...)> {};

// How many tensors a forward's result holds: 1, a tuple's size, or -1 (a vector: any).
template <typename R>
struct Outputs {
  static constexpr int count = 1;
};
template <typename... T>
struct Outputs<std::tuple<T...>> {
  static constexpr int count = sizeof...(T);
};
template <>
struct Outputs<std::vector<torch::Tensor>> {
  static constexpr int count = -1;
};

inline Tensors as_tensors(torch::Tensor t) { return {std::move(t)}; }
inline Tensors as_tensors(std::vector<torch::Tensor> ts) { return ts; }
template <typename... T>
Tensors as_tensors(std::tuple<T...> t) {
  return std::apply([](auto&&... x) { return Tensors{std::forward<decltype(x)>(x)...}; },
                    std::move(t));
}

template <typename Holder, size_t... I>
Tensors call(Holder& h, const Tensors& in, std::index_sequence<I...>) {
  return as_tensors(h->forward(in[I]...));
}

}  // namespace module_layer_detail

// A layer over `holder` whose forward takes inputs.size() tensors and returns outputs.size().
// Throws tandem::Error when the counts differ from the forward's.
template <typename Holder>
Layer make_layer(std::string name, Holder holder, std::vector<std::string> inputs,
                 std::vector<std::string> outputs) {
  using Impl = typename Holder::ContainedType;
  using F = module_layer_detail::Forward<decltype(&Impl::forward)>;
  constexpr int produced = module_layer_detail::Outputs<std::decay_t<typename F::Result>>::count;
  TANDEM_CHECK(inputs.size() == F::arity,
               "layer '{}': its module's forward takes {} tensor{}, but the layer names {} "
               "input{}",
               name, F::arity, F::arity == 1 ? "" : "s", inputs.size(),
               inputs.size() == 1 ? "" : "s");
  TANDEM_CHECK(produced < 0 || outputs.size() == static_cast<size_t>(produced),
               "layer '{}': its module's forward returns {} tensor{}, but the layer names {} "
               "output{}",
               name, produced, produced == 1 ? "" : "s", outputs.size(),
               outputs.size() == 1 ? "" : "s");
  TANDEM_CHECK(!outputs.empty(), "layer '{}' names no output", name);
  Layer l;
  l.name = std::move(name);
  l.module = holder.ptr();
  const size_t expected = outputs.size();
  const std::string layer = l.name;
  l.bind = [expected, layer](const std::shared_ptr<torch::nn::Module>& module) -> ForwardFn {
    Holder h(std::dynamic_pointer_cast<Impl>(module));
    return [h, expected, layer](const Tensors& in) mutable {
      Tensors out = module_layer_detail::call(h, in, std::make_index_sequence<F::arity>{});
      TANDEM_CHECK(out.size() == expected, "layer '{}': its forward returned {} tensors, not {}",
                   layer, out.size(), expected);
      return out;
    };
  };
  l.forward = l.bind(l.module);
  l.inputs = std::move(inputs);
  l.outputs = std::move(outputs);
  return l;
}

// The same with the names in braces: make_layer("up1", Up(...), {"dec2", "enc1"}, {"dec1"}).
template <typename Holder>
Layer make_layer(std::string name, Holder holder, std::initializer_list<std::string> inputs,
                 std::initializer_list<std::string> outputs) {
  return make_layer(std::move(name), std::move(holder), std::vector<std::string>(inputs),
                    std::vector<std::string>(outputs));
}

}  // namespace tandem::graph
