/*
 * Transaction-token bookkeeping, written once for every plugin: the table of
 * a filesystem's transactions, the overlap rule, and the ABI's seven
 * transaction ops (PLUGIN_TRANSACTION_OPS). A plugin supplies only how a
 * root is staged and how a staged tree is committed or dropped
 * (plugin_txn_hooks).
 *
 * A transaction is rooted at a directory by its first path (start, then
 * add_to_transaction) or at once (get_or_start_transaction_for_path). Roots
 * of live transactions never overlap: a second one on, inside or above a
 * root is ABORTED, and the core retries. decode_transaction_token gives the
 * staging path, where the core stages changes through ordinary ops.
 */
#ifndef ASYNCFS_PLUGIN_TXN_H_
#define ASYNCFS_PLUGIN_TXN_H_

#include <pthread.h>
#include <stddef.h>

#include "asyncfs/filesystem_interface.h"

typedef struct plugin_txn {
  char* root;    /* NULL until rooted */
  char* staging; /* set by the begin hook */
  TF_TransactionToken* token;
  struct plugin_txn* next;
  unsigned long serial; /* unique in the table: names staging trees */
  void* state;          /* the plugin's own (posix: its locks) */
} plugin_txn;

typedef struct plugin_txn_hooks {
  /* Stages txn->root, a directory below the top already checked against
   * the other roots, and sets txn->staging. Called with the table locked.
   * On failure, sets status, returns -1 and leaves nothing staged. */
  int (*begin)(const TF_Filesystem* filesystem, plugin_txn* txn,
               TF_Status* status);
  /* Commits (commit = 1) or drops the staged tree of a rooted txn. The
   * transaction stays in the table until this returns, so no other one
   * can start on its root meanwhile. */
  int (*finish)(const TF_Filesystem* filesystem, plugin_txn* txn, int commit,
                TF_Status* status);
  /* Frees txn->state; NULL when the plugin keeps none. */
  void (*release)(plugin_txn* txn);
  /* Called outside the table's lock by get_or_start and by finish, the ops
   * a remote store answers with a round trip (memory's latency); NULL for
   * none. */
  void (*request)(const TF_Filesystem* filesystem);
} plugin_txn_hooks;

typedef struct plugin_txn_table {
  const plugin_txn_hooks* hooks; /* NULL: the plugin has no transactions */
  pthread_mutex_t lock;
  plugin_txn* active;
  unsigned long serial;
} plugin_txn_table;

int plugin_txn_table_init(plugin_txn_table* table,
                          const plugin_txn_hooks* hooks);
/* Frees every transaction left (staged trees are the plugin's to drop). */
void plugin_txn_table_destroy(plugin_txn_table* table);

/* The length of the staging path of the transaction whose staging tree
 * holds path, 0 when none does. */
size_t plugin_txn_staging_prefix(plugin_txn_table* table, const char* path);

int plugin_start_transaction(const TF_Filesystem* filesystem,
                             TF_TransactionToken** token, TF_Status* status);
int plugin_end_transaction(const TF_Filesystem* filesystem,
                           TF_TransactionToken* token, TF_Status* status);
int plugin_abort_transaction(const TF_Filesystem* filesystem,
                             TF_TransactionToken* token, TF_Status* status);
int plugin_add_to_transaction(const TF_Filesystem* filesystem,
                              const char* path, TF_TransactionToken* token,
                              TF_Status* status);
int plugin_get_transaction_for_path(const TF_Filesystem* filesystem,
                                    const char* path,
                                    TF_TransactionToken** token,
                                    TF_Status* status);
int plugin_get_or_start_transaction_for_path(const TF_Filesystem* filesystem,
                                             const char* path,
                                             TF_TransactionToken** token,
                                             TF_Status* status);
char* plugin_decode_transaction_token(const TF_Filesystem* filesystem,
                                      const TF_TransactionToken* token);

/* Designated initializers for a TF_FilesystemOps table. */
#define PLUGIN_TRANSACTION_OPS                                               \
  .start_transaction = plugin_start_transaction,                             \
  .end_transaction = plugin_end_transaction,                                 \
  .add_to_transaction = plugin_add_to_transaction,                           \
  .get_transaction_for_path = plugin_get_transaction_for_path,               \
  .get_or_start_transaction_for_path =                                       \
      plugin_get_or_start_transaction_for_path,                              \
  .decode_transaction_token = plugin_decode_transaction_token,               \
  .abort_transaction = plugin_abort_transaction

#endif /* ASYNCFS_PLUGIN_TXN_H_ */
