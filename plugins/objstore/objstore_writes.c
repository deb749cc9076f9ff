/* Writing: a writer's first failure (objstore_failure), and many whole
 * objects written at once (objstore_write_objects), the write_files op of
 * every store that can upload an object in one request. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "objstore_internal.h"

void objstore_failure_init(objstore_failure* f) {
  pthread_mutex_init(&f->lock, NULL);
  f->status = TF_NewStatus();
}

void objstore_failure_destroy(objstore_failure* f) {
  pthread_mutex_destroy(&f->lock);
  TF_DeleteStatus(f->status);
}

void objstore_failure_set(objstore_failure* f, TF_Code code, const char* message) {
  if (code == TF_OK) return;
  pthread_mutex_lock(&f->lock);
  if (TF_GetCode(f->status) == TF_OK) TF_SetStatus(f->status, code, message);
  pthread_mutex_unlock(&f->lock);
}

void objstore_failure_record(objstore_failure* f, const TF_Status* failure) {
  objstore_failure_set(f, TF_GetCode(failure), TF_Message(failure));
}

int objstore_failure_take(objstore_failure* f, TF_Status* status) {
  TF_Code code;
  pthread_mutex_lock(&f->lock);
  code = TF_GetCode(f->status);
  TF_SetStatus(status, code, TF_Message(f->status));
  pthread_mutex_unlock(&f->lock);
  return code == TF_OK ? 0 : -1;
}

/* Object path through the plugin's writable file, as a caller would. */
static void write_alone(const TF_Filesystem* filesystem, const char* path, const char* data, size_t len,
                        TF_Status* status,
                        void (*new_writable)(const TF_Filesystem*, const char*, TF_WritableFile*, TF_Status*)) {
  const TF_WritableFileOps* ops = &objstore_upload_ops;
  TF_WritableFile file = {NULL};
  new_writable(filesystem, path, &file, status);
  if (file.plugin_file == NULL) return;
  ops->append(&file, data, len, status);
  if (TF_GetCode(status) == TF_OK) ops->close(&file, status);
  ops->cleanup(&file); /* a file that did not close leaves nothing */
}

void objstore_write_objects(objstore_engine* e, const objstore_settings* settings,
                            const TF_Filesystem* filesystem, const char* const* paths, int n,
                            const char* const* datas, const size_t* lengths, TF_Status** statuses,
                            size_t single_max,
                            void (*new_writable)(const TF_Filesystem*, const char*, TF_WritableFile*,
                                                 TF_Status*)) {
  const objstore_store* store = objstore_engine_store(e);
  void* ctx = objstore_engine_store_ctx(e);
  size_t m = (size_t)(n > 0 ? n : 1);
  objstore_exchange* xs = calloc(m, sizeof *xs);
  objstore_response* resps = calloc(m, sizeof *resps);
  TF_Status** sent = calloc(m, sizeof *sent);
  int i, k, count = 0;
  if (xs == NULL || resps == NULL || sent == NULL) {
    for (i = 0; i < n; ++i) plugin_set_oom(statuses[i]);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    if (lengths[i] > single_max) continue; /* below, alone */
    objstore_exchange_init(&xs[count], &resps[count], "PUT", NULL);
    if (store->put_request(ctx, paths[i], datas[i], lengths[i], &xs[count], statuses[i]) != 0) {
      if (xs[count].store_request != NULL) store->release_request(ctx, &xs[count]);
      continue;
    }
    sent[count++] = statuses[i];
  }
  objstore_run_many(e, settings, count, xs, sent);
  for (k = 0; k < count; ++k) store->release_request(ctx, &xs[k]);
  for (i = 0; i < n; ++i)
    if (lengths[i] > single_max)
      write_alone(filesystem, paths[i], datas[i], lengths[i], statuses[i], new_writable);
done:
  for (k = 0; k < count; ++k) objstore_response_free(&resps[k]);
  for (i = 0; i < n; ++i) objstore_forget(e, paths[i]);
  free(xs);
  free(resps);
  free(sent);
}
