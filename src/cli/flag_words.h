// The library's messages name option fields (Config::batch, PipelineOptions::microbatches); the
// command line's name its flags. flag_words() rewrites the first into the second for everything
// the command line prints from the library: errors, the memory plan, the help's catalog.
#pragma once

#include <string>

namespace tandem::cli {

// "Config::volume = 32 or more" -> "--volume 32 or more"; "PipelineOptions::slabs" ->
// "--spatial". Config's fields take their words from the option table (train/options.h), the
// other structs' from flag_words.cc's; a field without a flag is left as it is.
std::string flag_words(const std::string& text);

}  // namespace tandem::cli
