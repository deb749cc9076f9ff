/* What posix.c and posix_transactions.c share inside the posix plugin. */
#ifndef ASYNCFS_POSIX_INTERNAL_H_
#define ASYNCFS_POSIX_INTERNAL_H_

#include <sys/stat.h>
#include <sys/types.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_config.h"
#include "plugin_fs.h"
#include "plugin_txn.h"

/* The posix plugin's settings. */
typedef struct posix_settings {
  plugin_settings base;
  int64_t sync_on_close;
} posix_settings;

/* Its files (posix_files.c): the tables, and the constructors the
 * filesystem table names (posix_new_random_access_file, ...). */
extern const TF_RandomAccessFileOps posix_reader_ops;
extern const TF_WritableFileOps posix_writer_ops;
extern const TF_ReadOnlyMemoryRegionOps posix_region_ops;
PLUGIN_DECLARE_FILE_CONSTRUCTORS(posix_);
int64_t posix_new_random_access_file_if_ready(const TF_Filesystem* filesystem, const char* path,
                                              TF_RandomAccessFile* file, TF_Status* status);

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

/* open(2) of path to read, refusing a directory (FAILED_PRECONDITION):
 * the fd with *st filled, or -1 with status set. */
int posix_open_regular(const char* path, struct stat* st, TF_Status* status);

/* A writer on path opened with O_WRONLY | O_CREAT | flags and mode (for
 * new_writable_file and its kin), or status set. */
void posix_open_writer(const TF_Filesystem* filesystem, const char* path, int flags,
                       mode_t mode, TF_WritableFile* file, TF_Status* status);

/* rename and copy act on files: a directory on either side is refused
 * (FAILED_PRECONDITION, -1). */
int posix_check_file_pair(const char* src, const char* dst, TF_Status* status);

/* The process's umask, read without changing it where the system allows. */
mode_t posix_umask(void);

/* Where writes and copies land, and the ops that land them
 * (posix_landing.c). */
char* posix_landing_path(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
void posix_copy_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                     TF_Status* status);
void posix_copy_entry(const TF_Filesystem* filesystem, const char* src, const char* dst,
                      TF_Status* status);
void posix_new_temporary_file(const TF_Filesystem* filesystem, const char* path,
                              TF_WritableFile* file, TF_Status* status);
void posix_replace_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                        TF_Status* status);

/* read_files (op 41): the n files one after another (posix_bulk.c). */
void posix_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                      char* const* buffers, const size_t* caps, int64_t* sizes,
                      TF_Status** statuses);

#endif /* ASYNCFS_POSIX_INTERNAL_H_ */
