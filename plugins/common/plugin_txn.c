/* The transaction table and the ABI's transaction ops (see plugin_txn.h). */
#define _POSIX_C_SOURCE 200809L
#include "plugin_txn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_common.h"
#include "plugin_fork.h"
#include "plugin_state.h"

int plugin_txn_table_init(plugin_txn_table* table,
                          const plugin_txn_hooks* hooks) {
  table->hooks = hooks;
  table->active = NULL;
  table->serial = 0;
  if (pthread_mutex_init(&table->lock, NULL) != 0) return -1;
  return plugin_fork_guard_mutex(&table->lock, PLUGIN_LOCK_TRANSACTIONS);
}

static void txn_free(const plugin_txn_table* table, plugin_txn* txn) {
  if (txn->state != NULL && table->hooks->release != NULL)
    table->hooks->release(txn);
  free(txn->root);
  free(txn->staging);
  plugin_memory_free(txn->token);
  free(txn);
}

void plugin_txn_table_destroy(plugin_txn_table* table) {
  while (table->hooks != NULL && table->active != NULL) {
    plugin_txn* txn = table->active;
    table->active = txn->next;
    txn_free(table, txn);
  }
  plugin_fork_unguard(&table->lock);
  pthread_mutex_destroy(&table->lock);
}

size_t plugin_txn_staging_prefix(plugin_txn_table* table, const char* path) {
  const plugin_txn* txn;
  size_t base = 0;
  if (table->hooks == NULL) return 0;
  pthread_mutex_lock(&table->lock);
  for (txn = table->active; txn != NULL && base == 0; txn = txn->next)
    if (txn->staging != NULL && plugin_path_within(path, txn->staging))
      base = strlen(txn->staging);
  pthread_mutex_unlock(&table->lock);
  return base;
}

static plugin_txn_table* table_of(const TF_Filesystem* filesystem) {
  return &plugin_fs_of(filesystem)->txns;
}

static plugin_txn* txn_of(const TF_TransactionToken* token) {
  return token != NULL ? token->token : NULL;
}

static void request(const TF_Filesystem* filesystem) {
  const plugin_txn_hooks* hooks = table_of(filesystem)->hooks;
  if (hooks->request != NULL) hooks->request(filesystem);
}

static plugin_txn* txn_new(const TF_Filesystem* filesystem) {
  plugin_txn* txn = calloc(1, sizeof *txn);
  if (txn == NULL) return NULL;
  txn->token = plugin_memory_allocate(sizeof(TF_TransactionToken));
  if (txn->token == NULL) {
    free(txn);
    return NULL;
  }
  txn->token->token = txn;
  txn->token->owner = (TF_Filesystem*)filesystem;
  return txn;
}

static void link_txn(plugin_txn_table* table, plugin_txn* txn) {
  txn->next = table->active;
  table->active = txn;
}

static void unlink_txn(plugin_txn_table* table, plugin_txn* txn) {
  plugin_txn** at;
  for (at = &table->active; *at != NULL; at = &(*at)->next) {
    if (*at == txn) {
      *at = txn->next;
      return;
    }
  }
}

/* Roots txn at root: the top is refused, an overlap with another root is
 * ABORTED, then the plugin stages it. The table is locked. */
static int root_txn(const TF_Filesystem* filesystem, plugin_txn_table* table,
                    plugin_txn* txn, const char* root, TF_Status* status) {
  char msg[4200];
  const plugin_txn* other;
  if (root[0] == '\0' || strcmp(root, "/") == 0 || strcmp(root, ".") == 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "a transaction root must be a directory below /");
    return -1;
  }
  for (other = table->active; other != NULL; other = other->next) {
    if (other != txn && other->root != NULL &&
        plugin_paths_overlap(other->root, root)) {
      snprintf(msg, sizeof msg,
               "conflicts with a transaction in progress on %s", other->root);
      TF_SetStatus(status, TF_ABORTED, msg);
      return -1;
    }
  }
  txn->root = strdup(root);
  if (txn->root == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  txn->serial = ++table->serial;
  if (table->hooks->begin(filesystem, txn, status) != 0) {
    if (txn->state != NULL && table->hooks->release != NULL)
      table->hooks->release(txn);
    txn->state = NULL;
    free(txn->root);
    free(txn->staging);
    txn->root = txn->staging = NULL;
    return -1;
  }
  return 0;
}

int plugin_start_transaction(const TF_Filesystem* filesystem,
                             TF_TransactionToken** token, TF_Status* status) {
  plugin_txn_table* table = table_of(filesystem);
  plugin_txn* txn = txn_new(filesystem);
  if (txn == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  pthread_mutex_lock(&table->lock);
  link_txn(table, txn);
  pthread_mutex_unlock(&table->lock);
  *token = txn->token;
  plugin_set_ok(status);
  return 0;
}

int plugin_add_to_transaction(const TF_Filesystem* filesystem,
                              const char* path, TF_TransactionToken* token,
                              TF_Status* status) {
  plugin_txn_table* table = table_of(filesystem);
  plugin_txn* txn = txn_of(token);
  int rc = 0;
  pthread_mutex_lock(&table->lock);
  if (txn == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "not a transaction token");
    rc = -1;
  } else if (txn->root == NULL) {
    rc = root_txn(filesystem, table, txn, path, status); /* the first path */
  } else if (!plugin_path_within(path, txn->root)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "the path is outside the transaction's root");
    rc = -1;
  }
  pthread_mutex_unlock(&table->lock);
  if (rc == 0) plugin_set_ok(status);
  return rc;
}

int plugin_get_transaction_for_path(const TF_Filesystem* filesystem,
                                    const char* path,
                                    TF_TransactionToken** token,
                                    TF_Status* status) {
  plugin_txn_table* table = table_of(filesystem);
  const plugin_txn* txn;
  *token = NULL;
  pthread_mutex_lock(&table->lock);
  for (txn = table->active; txn != NULL && *token == NULL; txn = txn->next)
    if (txn->root != NULL && plugin_path_within(path, txn->root))
      *token = txn->token;
  pthread_mutex_unlock(&table->lock);
  if (*token == NULL) {
    TF_SetStatus(status, TF_NOT_FOUND, "no transaction covers the path");
    return -1;
  }
  plugin_set_ok(status);
  return 0;
}

int plugin_get_or_start_transaction_for_path(const TF_Filesystem* filesystem,
                                             const char* path,
                                             TF_TransactionToken** token,
                                             TF_Status* status) {
  plugin_txn_table* table = table_of(filesystem);
  plugin_txn* txn;
  request(filesystem);
  *token = NULL;
  pthread_mutex_lock(&table->lock);
  for (txn = table->active; txn != NULL; txn = txn->next)
    if (txn->root != NULL && strcmp(txn->root, path) == 0) break;
  if (txn == NULL) {
    txn = txn_new(filesystem);
    if (txn == NULL) {
      plugin_set_oom(status);
    } else if (root_txn(filesystem, table, txn, path, status) != 0) {
      txn_free(table, txn);
      txn = NULL;
    } else {
      link_txn(table, txn);
    }
  }
  pthread_mutex_unlock(&table->lock);
  if (txn == NULL) return -1;
  *token = txn->token;
  plugin_set_ok(status);
  return 0;
}

char* plugin_decode_transaction_token(const TF_Filesystem* filesystem,
                                      const TF_TransactionToken* token) {
  const plugin_txn* txn = txn_of(token);
  (void)filesystem;
  return plugin_strdup(txn != NULL && txn->staging != NULL ? txn->staging
                                                           : "");
}

static int finish(const TF_Filesystem* filesystem, TF_TransactionToken* token,
                  int commit, TF_Status* status) {
  plugin_txn_table* table = table_of(filesystem);
  plugin_txn* txn = txn_of(token);
  int rc = 0;
  if (txn == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "not a transaction token");
    return -1;
  }
  request(filesystem);
  if (txn->root != NULL) /* never rooted: nothing was staged */
    rc = table->hooks->finish(filesystem, txn, commit, status);
  pthread_mutex_lock(&table->lock);
  unlink_txn(table, txn);
  pthread_mutex_unlock(&table->lock);
  txn_free(table, txn);
  if (rc == 0) plugin_set_ok(status);
  return rc;
}

int plugin_end_transaction(const TF_Filesystem* filesystem,
                           TF_TransactionToken* token, TF_Status* status) {
  return finish(filesystem, token, 1, status);
}

int plugin_abort_transaction(const TF_Filesystem* filesystem,
                             TF_TransactionToken* token, TF_Status* status) {
  return finish(filesystem, token, 0, status);
}
