// Expects a call to throw tandem::Error whose message holds every given fragment.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tandem/common/check.h"

namespace tandem {

template <typename F>
void expect_error(F f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace tandem
