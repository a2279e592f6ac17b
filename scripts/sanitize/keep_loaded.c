/* Preloaded by scripts/check-sanitize into every process of the suite: dlclose() leaves the
 * library loaded. OpenMPI 4 unloads its components (mca_*.so) in MPI_Finalize, before
 * LeakSanitizer looks at exit, and what they left allocated then has frames in no module
 * ("<unknown module>") that no suppression can name. OpenMPI 4 has no setting to keep them
 * (its mca_base_component_disable_dlclose came in 5.0). Written by hand: no packaged library
 * does this one thing. */
#include <dlfcn.h>

int dlclose(void *handle) {
  (void)handle;
  return 0;
}
