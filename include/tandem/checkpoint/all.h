// Checkpoints: save, load (onto any partition), consolidate to one PyTorch state dict.
#pragma once

#include "tandem/checkpoint/files.h"
#include "tandem/checkpoint/load.h"
#include "tandem/checkpoint/manifest.h"
#include "tandem/checkpoint/save.h"
#include "tandem/checkpoint/state.h"
#include "tandem/checkpoint/state_dict.h"
