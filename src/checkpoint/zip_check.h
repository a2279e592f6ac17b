// The structure of a zip archive checked before LibTorch reads it (an internal part of the
// checkpoint library). PyTorch's file format (torch.save since 1.6, tandem's shards and state
// dicts) is a zip archive, and LibTorch's own zip reader trusts what the archive's directory
// declares: a damaged or hostile file can make it read past the bytes or allocate gigabytes.
#pragma once

#include <string>
#include <vector>

namespace tandem::checkpoint::detail {

// Throws tandem::Error naming `path` and saying what is wrong unless `bytes` is a zip archive
// whose directory can be read and whose every entry (stored or deflated) lies inside the
// bytes, with a local header that agrees and a size the data can hold. `what` names the file's
// role in the message ("a state dict", "a shard").
void check_zip_archive(const std::vector<char>& bytes, const std::string& path,
                       const std::string& what);

}  // namespace tandem::checkpoint::detail
