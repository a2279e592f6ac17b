// Everything of the schedule part (tandem::schedule): pure C++, no tensors.
#pragma once

#include "tandem/schedule/action.h"
#include "tandem/schedule/generators.h"
#include "tandem/schedule/registry.h"
#include "tandem/schedule/schedule.h"
#include "tandem/schedule/simulate.h"
#include "tandem/schedule/stage_graph.h"
#include "tandem/schedule/validate.h"
