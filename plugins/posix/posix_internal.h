/* What posix.c and posix_transactions.c share inside the posix plugin. */
#ifndef ASYNCFS_POSIX_INTERNAL_H_
#define ASYNCFS_POSIX_INTERNAL_H_

#include "asyncfs/filesystem_interface.h"

/* mkdir -p; an existing non-directory on the way is FAILED_PRECONDITION.
 * Returns 0, or -1 with status set. */
int posix_make_dirs(const char* path, TF_Status* status);

int posix_start_transaction(const TF_Filesystem* filesystem,
                            TF_TransactionToken** token, TF_Status* status);
int posix_end_transaction(const TF_Filesystem* filesystem,
                          TF_TransactionToken* token, TF_Status* status);
int posix_abort_transaction(const TF_Filesystem* filesystem,
                            TF_TransactionToken* token, TF_Status* status);
int posix_add_to_transaction(const TF_Filesystem* filesystem, const char* path,
                             TF_TransactionToken* token, TF_Status* status);
int posix_get_transaction_for_path(const TF_Filesystem* filesystem,
                                   const char* path,
                                   TF_TransactionToken** token,
                                   TF_Status* status);
int posix_get_or_start_transaction_for_path(const TF_Filesystem* filesystem,
                                            const char* path,
                                            TF_TransactionToken** token,
                                            TF_Status* status);
/* INVALID_ARGUMENT (and -1) when path lies in a transaction's staging tree
 * and reaches it through a symlink; 0 otherwise. */
int posix_check_staged_path(const char* path, TF_Status* status);
char* posix_decode_transaction_token(const TF_Filesystem* filesystem,
                                     const TF_TransactionToken* token);

#endif /* ASYNCFS_POSIX_INTERNAL_H_ */
