// --data nifti:DIR and npy:DIR: a folder of one's own files, read as the model needs
// (train/volume_source.h, train/npy_source.h).
#include "tandem/train/catalog.h"
#include "tandem/train/npy_source.h"
#include "tandem/train/volume_source.h"

namespace tandem::train {

std::vector<DataKind> data_kinds_folders() {
  DataKind nifti;
  nifti.name = "nifti";
  nifti.summary = "image and label NIfTI files (.nii, .nii.gz), cropped to Config::volume^3";
  nifti.folder = true;
  nifti.make = [](const Config& c, const std::string& dir, const ModelNeeds& needs) {
    return make_nifti_source(dir, needs, c.volume, c.test_files, c.seed, c.train_samples,
                             c.test_samples, c.normalize);
  };
  DataKind npy;
  npy.name = "npy";
  npy.summary = "NumPy arrays train_x.npy, train_y.npy (and test_x.npy, test_y.npy)";
  npy.folder = true;
  npy.make = [](const Config& c, const std::string& dir, const ModelNeeds& needs) {
    return make_npy_source(dir, needs, c.seed, c.normalize);
  };
  return {nifti, npy};
}

}  // namespace tandem::train
