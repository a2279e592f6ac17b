// NIfTI volumes, as --data mri and nifti:DIR read them, through the public entry points (nifticlib
// behind them): any bytes either read as a [C,Z,Y,X] float volume or throw tandem::Error. The
// input is named .nii.gz, under which name nifticlib reads gzip and plain bytes alike. Any other
// exception, or a sanitizer report, is a crash.
#include "fuzz_file.h"
#include "tandem/common/check.h"
#include "tandem/data/nifti.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tandem::fuzz::FuzzFile file(".nii.gz");
  const std::string& path = file.write(data, size);
  try {
    (void)tandem::data::read_nifti_shape(path);
  } catch (const tandem::Error&) {
  }
  try {
    tandem::data::Volume v = tandem::data::read_nifti(path);
    TANDEM_ASSERT(v.data.dim() == 4 && v.data.scalar_type() == torch::kFloat,
                  "read_nifti returned a {}-d {} tensor", v.data.dim(),
                  c10::toString(v.data.scalar_type()));
  } catch (const tandem::Error&) {
  }
  return 0;
}
