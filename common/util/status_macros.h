// Early return of a failed absl::Status, for functions that run a sequence of checked steps.
#pragma once

#include "absl/status/status.h"

// Evaluates `expr` (an absl::Status) once and returns it from the enclosing function when it
// is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                                   \
  do {                                                                  \
    if (absl::Status tessera_status_ = (expr); !tessera_status_.ok()) { \
      return tessera_status_;                                           \
    }                                                                   \
  } while (false)
