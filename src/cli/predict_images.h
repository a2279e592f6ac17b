// tandem predict for models of images (the mlp, ONNX classifiers), and what it shares with the
// scans' part (predict_cmd.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "session.h"
#include "tandem/trace/progress.h"
#include "tandem/train/config.h"
#include "tandem/train/predict.h"

namespace tandem::cli {

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One file to predict and where its result goes.
struct ScanJob {
  std::string input, output;
  std::string label;  // with --labels: the file's labels
};

struct ImagesOptions {
  int64_t batch = 256;                 // images per forward
  std::string kind = "probabilities";  // --output-kind: probabilities | labels
  data::Normalization normalization{data::Normalize::kDataset};  // kDataset without moments: the
                                                                 // given images' own
  std::string output;                                            // --output
  bool folder = false;                                           // --output is a folder of results
};

// Predicts every file of images of `jobs` (IDX or .npy) with `c`'s model on the session's job,
// writes each result (.npy or CSV) and prints one result line per file (with the accuracy
// against its labels), then their mean. Returns the exit status.
// The progress display of file `file` (from 0) of `files`, counting forwards: a callback for
// predict_volume and predict_images that opens it at the first forward, with the total, on
// the main process (`show`). `progress` holds it; finish it after the prediction.
std::function<void(int64_t, int64_t)> forward_progress(std::optional<trace::Progress>& progress,
                                                       bool show, trace::Progress::Mode mode,
                                                       size_t file, size_t files);

int run_images(const train::Config& c, const std::vector<ScanJob>& jobs, const ImagesOptions& o,
               Session& session);

}  // namespace tandem::cli
