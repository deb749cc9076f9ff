/* What posix.c and posix_transactions.c share inside the posix plugin. */
#ifndef ASYNCFS_POSIX_INTERNAL_H_
#define ASYNCFS_POSIX_INTERNAL_H_

#include "asyncfs/filesystem_interface.h"
#include "plugin_txn.h"

/* mkdir -p; an existing non-directory on the way is FAILED_PRECONDITION.
 * Returns 0, or -1 with status set. */
int posix_make_dirs(const char* path, TF_Status* status);

/* renameat2(2) with flags (RENAME_NOREPLACE, RENAME_EXCHANGE); -1 with
 * errno ENOSYS where the C library has no such call. */
int posix_rename2(const char* from, const char* to, unsigned flags);

/* How the posix plugin stages, commits and drops a transaction's tree. */
extern const plugin_txn_hooks posix_transaction_hooks;

/* INVALID_ARGUMENT (and -1) when path lies in a transaction's staging tree
 * and reaches it through a symlink; 0 otherwise. */
int posix_check_staged_path(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status);

/* read_files (op 41): the n files one after another (posix_bulk.c). */
void posix_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                      char* const* buffers, const size_t* caps, int64_t* sizes,
                      TF_Status** statuses);

#endif /* ASYNCFS_POSIX_INTERNAL_H_ */
