// What tandem's NIfTI reader and writer share about nifticlib: ownership of its images and
// the lock around its calls. Internal to tandem::data.
#pragma once

#include <nifti2_io.h>

#include <memory>
#include <mutex>

namespace tandem::data::nifti_lib {

struct ImageFree {
  void operator()(nifti_image* image) const { nifti_image_free(image); }
};
// A nifticlib image and its data, freed with it.
using Image = std::unique_ptr<nifti_image, ImageFree>;

// nifticlib keeps global options (the debug level, set to 0 so that it does not print what
// tandem reports itself) and is not documented to be thread-safe: every call holds this lock.
// Returns the lock, taken.
inline std::unique_lock<std::mutex> lock() {
  static std::mutex mutex;
  std::unique_lock<std::mutex> held(mutex);
  static const bool quiet = [] {
    nifti_set_debug_level(0);
    return true;
  }();
  (void)quiet;
  return held;
}

}  // namespace tandem::data::nifti_lib
