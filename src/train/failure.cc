#include "tandem/train/failure.h"

#include <c10/util/Exception.h>

#include "tandem/common/check.h"
#include "tandem/memory/out_of_memory.h"
#include "tandem/runtime/pipeline.h"

namespace tandem::train {

std::string error_message(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

Failure failure_of(const std::exception_ptr& error, When when) {
  try {
    std::rethrow_exception(error);
  } catch (const runtime::StepError& e) {
    return {e.out_of_memory ? kExitOutOfMemory : kExitFailure, e.what()};
  } catch (const memory::OutOfMemory& e) {
    return {kExitOutOfMemory, e.what()};
  } catch (const memory::DoesNotFit& e) {
    return {kExitOutOfMemory, e.what()};
  } catch (const Error& e) {
    return {when == When::kBeforeWork ? kExitUsage : kExitFailure, e.what()};
  } catch (const std::exception& e) {
    return {kExitFailure, error_message(e)};
  } catch (...) {
    return {kExitFailure, "an exception that is not a std::exception"};
  }
}

}  // namespace tandem::train
