/*
 * Core-only helpers of the asyncfs status runtime. Plugins never call these;
 * the Python core uses them to handle many statuses in one C call. The
 * region between the CDEF markers is read by asyncfs's cffi binding.
 */
#ifndef ASYNCFS_RUNTIME_CORE_H_
#define ASYNCFS_RUNTIME_CORE_H_

#include "asyncfs/filesystem_interface.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ASYNCFS-CDEF-BEGIN */

/* n fresh statuses, all OK; NULL when out of memory. */
TF_Status** ASYNCFS_NewStatusArray(int n);
void ASYNCFS_DeleteStatusArray(TF_Status** statuses, int n);
/* codes[i] = TF_GetCode(statuses[i]) for i < n. */
void ASYNCFS_StatusArrayCodes(TF_Status* const* statuses, int n, int* codes);

/* ASYNCFS-CDEF-END */

#ifdef __cplusplus
}
#endif

#endif /* ASYNCFS_RUNTIME_CORE_H_ */
