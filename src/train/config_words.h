// The words of Config's choices (--partition, --precision, ...), for the option table
// (options.cc) and for name_of (config.h).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <utility>
#include <vector>

#include "tandem/common/check.h"
#include "tandem/train/config.h"

namespace tandem::train {

template <typename E>
using Words = std::vector<std::pair<E, const char*>>;

const Words<PartitionBy>& partition_words();
const Words<Precision>& precision_words();
const Words<LossScaling>& loss_scaling_words();
const Words<TransportKind>& transport_words();
const Words<MpiCuda>& mpi_cuda_words();
const Words<OptimizerKind>& optimizer_words();
const Words<LrSchedule>& lr_schedule_words();
const Words<trace::Progress::Mode>& progress_words();

template <typename E>
std::string word_of(const Words<E>& words, E v) {
  for (const auto& [value, word] : words)
    if (value == v) return word;
  return "?";
}

template <typename E>
std::vector<std::string> all_words(const Words<E>& words) {
  std::vector<std::string> out;
  for (const auto& [value, word] : words) out.emplace_back(word);
  return out;
}

template <typename E>
E value_of(const Words<E>& words, const std::string& text) {
  for (const auto& [value, word] : words)
    if (text == word) return value;
  TANDEM_CHECK(false, "{} is not one of {}", text, fmt::join(all_words(words), ", "));
  return words.front().first;
}

}  // namespace tandem::train
