#include "tandem/common/output_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tandem/common/check.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// "" when this process may create entries in `folder` (an existing folder), else why not.
std::string cannot_write_in(const fs::path& folder) {
  if (::access(folder.c_str(), W_OK | X_OK) == 0) return "";
  return std::strerror(errno);
}

}  // namespace

void check_output_file(const std::string& path, const std::string& option) {
  TANDEM_CHECK(!path.empty(), "{} needs a file name", option);
  const fs::path file(path);
  std::error_code ec;
  if (fs::exists(file, ec)) {
    TANDEM_CHECK(!fs::is_directory(file, ec), "{} {}: that is a folder; give a file name", option,
                 path);
    TANDEM_CHECK(::access(file.c_str(), W_OK) == 0, "{} {}: the file cannot be overwritten: {}",
                 option, path, std::strerror(errno));
    return;
  }
  const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
  TANDEM_CHECK(fs::exists(folder, ec), "{} {}: the folder {} does not exist; create it first",
               option, path, folder.string());
  TANDEM_CHECK(fs::is_directory(folder, ec), "{} {}: {} is not a folder", option, path,
               folder.string());
  const std::string why = cannot_write_in(folder);
  TANDEM_CHECK(why.empty(), "{} {}: cannot write in the folder {}: {}", option, path,
               folder.string(), why);
}

void check_output_folder(const std::string& path, const std::string& option) {
  TANDEM_CHECK(!path.empty(), "{} needs a folder name", option);
  std::error_code ec;
  fs::path existing = fs::absolute(fs::path(path), ec);
  TANDEM_CHECK(!ec, "{} {}: {}", option, path, ec.message());
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing)
    existing = existing.parent_path();
  TANDEM_CHECK(fs::is_directory(existing, ec), "{} {}: {} is not a folder", option, path,
               existing.string());
  const std::string why = cannot_write_in(existing);
  TANDEM_CHECK(why.empty(), "{} {}: cannot write in {}: {}", option, path, existing.string(), why);
}

}  // namespace tandem
