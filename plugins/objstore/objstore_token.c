/* Bearer tokens from OAuth token services, and their cache
 * (objstore_token.h). */
#define _POSIX_C_SOURCE 200809L

#include "objstore_token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objstore_formats.h"

#define MAX_DOCUMENT (1 << 20)

static void forget_value(objstore_token* t) {
  if (t->value != NULL) memset(t->value, 0, strlen(t->value));
  free(t->value);
  t->value = NULL;
}

void objstore_token_cache_init(objstore_token_cache* c, const char* store) {
  memset(c, 0, sizeof *c);
  c->store = store;
  pthread_mutex_init(&c->lock, NULL);
  c->failure = TF_NewStatus();
}

void objstore_token_cache_destroy(objstore_token_cache* c) {
  forget_value(&c->token);
  free(c->key);
  if (c->failure != NULL) TF_DeleteStatus(c->failure);
  pthread_mutex_destroy(&c->lock);
}

int objstore_token_get(objstore_token_cache* c, const char* key, objstore_token_fetch fetch,
                       void* ctx, char* out, size_t cap, TF_Status* status) {
  int rc = 0, same;
  pthread_mutex_lock(&c->lock);
  same = c->key != NULL && strcmp(c->key, key) == 0;
  if (same && c->token.value != NULL &&
      c->token.expires - (int64_t)time(NULL) > OBJSTORE_TOKEN_REFRESH_S) {
    snprintf(out, cap, "%s", c->token.value);
  } else if (same && c->token.value == NULL &&
             objstore_now_ms() - c->asked_ms < OBJSTORE_TOKEN_RETRY_AFTER_MS) {
    TF_SetStatus(status, TF_GetCode(c->failure), TF_Message(c->failure)); /* asked just now */
    rc = -1;
  } else {
    objstore_token got = {NULL, 0, ""};
    rc = fetch(ctx, &got, status);
    free(c->key);
    c->key = strdup(key);
    forget_value(&c->token);
    c->token = got;
    TF_SetStatus(c->failure, TF_GetCode(status), rc == 0 ? "" : TF_Message(status));
    c->asked_ms = objstore_now_ms();
    if (rc == 0) {
      snprintf(out, cap, "%s", c->token.value);
      PLUGIN_LOG(TF_INFO, "%s: credentials: a token from %s, valid for %lld s", c->store, c->token.source,
             (long long)(c->token.expires - (int64_t)time(NULL)));
    } else {
      const char* why = TF_Message(status);
      size_t k = strlen(c->store);
      if (strncmp(why, c->store, k) == 0 && why[k] == ':' && why[k + 1] == ' ') why += k + 2;
      PLUGIN_LOG(TF_WARNING, "%s: %s", c->store, why);
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

void objstore_token_describe(objstore_token_cache* c, char* out, size_t cap) {
  pthread_mutex_lock(&c->lock);
  if (c->token.value != NULL) snprintf(out, cap, "%s", c->token.source);
  else snprintf(out, cap, "none found: %s", TF_Message(c->failure));
  pthread_mutex_unlock(&c->lock);
}

/* A token service's answer: {"access_token", "expires_in"} (a number, or
 * a string of one, as Azure's metadata service sends it). */
static int take_token(const objstore_response* resp, objstore_token* out, TF_Status* status) {
  char* token = objstore_json_get(resp->body.data, resp->body.len, "access_token");
  char* expires_in = objstore_json_get(resp->body.data, resp->body.len, "expires_in");
  if (token == NULL || *token == '\0') {
    char msg[500];
    snprintf(msg, sizeof msg, "%s answered without an access_token", out->source);
    TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
    free(token);
    free(expires_in);
    return -1;
  }
  out->value = token;
  out->expires = (int64_t)time(NULL) + (expires_in != NULL ? strtoll(expires_in, NULL, 10) : 3600);
  free(expires_in);
  return 0;
}

int objstore_token_ask(objstore_engine* engine, const objstore_settings* settings, const char* url,
                       const char* form, struct curl_slist* headers, int direct,
                       objstore_token* out, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  int rc;
  objstore_exchange_init(&x, &resp, form != NULL ? "POST" : "GET", NULL);
  x.url = (char*)url;
  x.headers = headers;
  x.body = form;
  x.body_len = form != NULL ? strlen(form) : 0;
  x.max_body = MAX_DOCUMENT;
  x.direct = direct;
  rc = objstore_fetch(engine, settings, &x, status);
  if (rc != 0) {
    char msg[1000];
    snprintf(msg, sizeof msg, "%s did not answer: %.400s", out->source, TF_Message(status));
    TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
  } else if (resp.http / 100 != 2) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s refused: HTTP %ld %.300s", out->source, resp.http,
             resp.body.data != NULL ? resp.body.data : "");
    TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
    rc = -1;
  }
  if (rc == 0) rc = take_token(&resp, out, status);
  objstore_response_free(&resp);
  return rc;
}

int objstore_form_value(plugin_buf* out, const char* s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      if (plugin_buf_append(out, s, 1) != 0) return -1;
    } else {
      char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
      if (plugin_buf_append(out, esc, 3) != 0) return -1;
    }
  }
  return 0;
}
