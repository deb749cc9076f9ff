/* Where a request's credentials come from: the settings (options or the
 * environment), else the sources boto3 tries, in boto3's order:
 *
 *   1. web identity: a token file and a role, exchanged at STS
 *      (AssumeRoleWithWebIdentity)
 *   2. the shared credentials file's profile (~/.aws/credentials)
 *   3. the config file profile's credential_process
 *   4. the config file's profile (~/.aws/config)
 *   5. container credentials (ECS, EKS Pod Identity)
 *   6. EC2 instance metadata, IMDSv2
 *
 * The first source that is configured decides: one that is configured but
 * fails is an error, not a step to the next. What a source gave is kept per
 * filesystem and fetched again 10 minutes before it expires. The sources
 * are asked at most once in 3 seconds: a burst of requests without
 * credentials asks once and all get that failure, and keys that come back
 * already inside the refresh window are not fetched again per request. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plugin_fork.h"
#include "objstore_formats.h"
#include "s3_formats.h"
#include "s3_internal.h"

#define REFRESH_MARGIN_S 600 /* boto3's mandatory refresh window */
#define ASK_INTERVAL_MS 3000 /* between two askings of the sources */
#define MAX_DOCUMENT (1 << 20)

extern char** environ;

/* ---- reference-counted credentials ------------------------------------------ */

static s3_credentials* credentials_new(const char* access_key, const char* secret_key,
                                       const char* session_token, int64_t expires,
                                       const char* source) {
  s3_credentials* c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->refs = 1;
  c->access_key = strdup(access_key);
  c->secret_key = strdup(secret_key);
  c->session_token = strdup(session_token != NULL ? session_token : "");
  c->expires = expires;
  snprintf(c->source, sizeof c->source, "%s", source);
  if (c->access_key == NULL || c->secret_key == NULL || c->session_token == NULL) {
    c->refs = 0;
    free(c->access_key);
    free(c->secret_key);
    free(c->session_token);
    free(c);
    return NULL;
  }
  return c;
}

void s3_credentials_release(const s3_credentials* credentials) {
  s3_credentials* c = (s3_credentials*)credentials;
  if (c == NULL || c->refs == 0) return; /* anonymous, or borrowed from settings */
  if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  free(c->access_key);
  memset(c->secret_key, 0, strlen(c->secret_key));
  free(c->secret_key);
  free(c->session_token);
  free(c);
}

/* ---- files and profiles --------------------------------------------------------- */

/* $name, or $HOME/fallback ("" when neither). */
static void file_path(const char* name, const char* fallback, char* out, size_t cap) {
  const char* set = getenv(name);
  const char* home = getenv("HOME");
  if (set != NULL && *set != '\0')
    snprintf(out, cap, "%s", set);
  else if (home != NULL && *home != '\0')
    snprintf(out, cap, "%s/%s", home, fallback);
  else
    snprintf(out, cap, "%s", "");
}

const char* s3_profile_name(const s3_config* cfg) {
  return *cfg->profile != '\0' ? cfg->profile : "default";
}

/* A profile as the two shared files hold it (either may be missing). */
typedef struct profile {
  const char* name;
  char* config;      /* the config file's text */
  char* credentials; /* the credentials file's text */
  char config_section[300];
  char config_path[1024];
  char credentials_path[1024];
} profile;

static void profile_load(profile* p, const char* name) {
  memset(p, 0, sizeof *p);
  p->name = name;
  file_path("AWS_CONFIG_FILE", ".aws/config", p->config_path, sizeof p->config_path);
  file_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", p->credentials_path,
            sizeof p->credentials_path);
  p->config = *p->config_path ? plugin_read_text(p->config_path, MAX_DOCUMENT) : NULL;
  p->credentials = *p->credentials_path ? plugin_read_text(p->credentials_path, MAX_DOCUMENT) : NULL;
  /* The config file names profiles "[profile x]", except "[default]". */
  if (strcmp(name, "default") == 0)
    snprintf(p->config_section, sizeof p->config_section, "default");
  else
    snprintf(p->config_section, sizeof p->config_section, "profile %s", name);
}

static void profile_free(profile* p) {
  free(p->config);
  free(p->credentials);
}

char* s3_config_file_get(const char* text, const char* profile, const char* key) {
  char section[300];
  char* v;
  if (text == NULL) return NULL;
  if (strcmp(profile, "default") != 0) {
    snprintf(section, sizeof section, "profile %s", profile);
    return s3_ini_get(text, section, key, NULL);
  }
  /* botocore reads "[profile default]" too. */
  v = s3_ini_get(text, "default", key, NULL);
  return v != NULL ? v : s3_ini_get(text, "profile default", key, NULL);
}

char* s3_config_file_text(void) {
  char path[1024];
  file_path("AWS_CONFIG_FILE", ".aws/config", path, sizeof path);
  return *path ? plugin_read_text(path, MAX_DOCUMENT) : NULL;
}

static char* from_config(const profile* p, const char* key) {
  return s3_config_file_get(p->config, p->name, key);
}

static char* from_credentials(const profile* p, const char* key) {
  return p->credentials != NULL ? s3_ini_get(p->credentials, p->name, key, NULL) : NULL;
}

/* Whether either file has the profile. */
static int profile_exists(const profile* p) {
  int in_config = 0, in_credentials = 0, in_default = 0;
  free(p->config != NULL ? s3_ini_get(p->config, p->config_section, "", &in_config) : NULL);
  if (p->config != NULL && strcmp(p->name, "default") == 0)
    free(s3_ini_get(p->config, "profile default", "", &in_default));
  free(p->credentials != NULL ? s3_ini_get(p->credentials, p->name, "", &in_credentials)
                              : NULL);
  return in_config || in_credentials || in_default;
}

/* ---- one resolution ---------------------------------------------------------------- */

/* What resolving needs: the settings, the profile, and where to say what
 * went wrong. Each source returns 1 (credentials found), 0 (not
 * configured here) or -1 (configured, failed: status set). */
typedef struct chain {
  s3_fs* fs; /* its engine fetches */
  const s3_config* cfg;
  profile p;
  TF_Status* status;
  s3_credentials* found;
  char note[320]; /* why the instance metadata gave nothing */
} chain;

static int fail(chain* ch, TF_Code code, const char* fmt, const char* a, const char* b) {
  char msg[4096];
  snprintf(msg, sizeof msg, fmt, a, b);
  TF_SetStatus(ch->status, code, msg);
  return -1;
}

/* Takes credentials from a parsed document; keys absent means malformed. */
static int take(chain* ch, char* access_key, char* secret_key, char* token, char* expiration,
                const char* source) {
  int64_t expires = 0;
  int rc = 1;
  if (access_key == NULL || secret_key == NULL || *access_key == '\0' || *secret_key == '\0') {
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: %s gave no access key id and secret access key",
              source, "");
  } else if (expiration != NULL && *expiration != '\0' &&
             (expires = objstore_parse_time(expiration)) < 0) {
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: %s gave an expiration that is not a time: '%s'",
              source, expiration);
  } else {
    ch->found = credentials_new(access_key, secret_key, token, expires, source);
    if (ch->found == NULL) rc = fail(ch, TF_RESOURCE_EXHAUSTED, "s3: out of memory%s%s", "", "");
  }
  free(access_key);
  if (secret_key != NULL) memset(secret_key, 0, strlen(secret_key));
  free(secret_key);
  free(token);
  free(expiration);
  return rc;
}

/* ---- HTTP for the metadata services -------------------------------------------------- */

typedef struct fetched {
  long http;
  plugin_buf body;
  char error[CURL_ERROR_SIZE];
} fetched;

/* One request to a credential or metadata service, through the
 * filesystem's engine with its retry policy, at most attempts tries of at
 * most timeout_ms each. 0 when it was answered (f->http says how). */
static int fetch(const chain* ch, const char* method, const char* url,
                 struct curl_slist* headers, const char* body, long timeout_ms,
                 int attempts, int direct, fetched* f) {
  objstore_settings settings;
  objstore_exchange x;
  objstore_response resp;
  TF_Status* status = TF_NewStatus();
  int rc;
  settings = ch->cfg->transport;
  settings.connect_timeout_ms = timeout_ms;
  objstore_exchange_init(&x, &resp, body != NULL ? "POST" : method, NULL);
  x.url = (char*)url;
  x.headers = headers;
  x.body = body;
  x.body_len = body != NULL ? strlen(body) : 0;
  x.max_body = MAX_DOCUMENT;
  x.timeout_ms = timeout_ms;
  x.max_attempts = attempts;
  x.direct = direct;
  rc = objstore_fetch(ch->fs->store.engine, &settings, &x, status);
  f->http = resp.http;
  plugin_buf_free(&f->body);
  f->body = resp.body;
  resp.body = (plugin_buf){0};
  if (f->body.data == NULL) plugin_buf_append(&f->body, "", 0);
  snprintf(f->error, sizeof f->error, "%s", rc == 0 ? "" : TF_Message(status));
  objstore_response_free(&resp);
  TF_DeleteStatus(status);
  return rc;
}

static char* form_encode(const char* s) { return s3_uri_encode(s, 0); }

/* ---- 1. web identity -------------------------------------------------------------------- */

static int web_identity(chain* ch) {
  const char* env_file = getenv("AWS_WEB_IDENTITY_TOKEN_FILE");
  const char* env_role = getenv("AWS_ROLE_ARN");
  const char* env_name = getenv("AWS_ROLE_SESSION_NAME");
  const char* env_sts = getenv("AWS_ENDPOINT_URL_STS");
  char* token_file = env_file != NULL && *env_file ? strdup(env_file)
                                                  : from_config(&ch->p, "web_identity_token_file");
  char* role = env_role != NULL && *env_role ? strdup(env_role) : from_config(&ch->p, "role_arn");
  char* name = env_name != NULL && *env_name ? strdup(env_name)
                                            : from_config(&ch->p, "role_session_name");
  char *token = NULL, *e_role = NULL, *e_name = NULL, *e_token = NULL;
  char url[512], default_name[64];
  plugin_buf form = {0};
  fetched f;
  int rc = 0;
  memset(&f, 0, sizeof f);
  if (token_file == NULL || role == NULL || *token_file == '\0' || *role == '\0') goto done;
  token = plugin_read_text(token_file, MAX_DOCUMENT);
  if (token == NULL) {
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: cannot read the web identity token file '%s'%s",
              token_file, "");
    goto done;
  }
  token[strcspn(token, "\r\n")] = '\0';
  if (name == NULL || *name == '\0') {
    snprintf(default_name, sizeof default_name, "asyncfs-%lld", (long long)time(NULL));
    free(name);
    name = strdup(default_name);
  }
  if (env_sts != NULL && *env_sts)
    snprintf(url, sizeof url, "%s", env_sts);
  else
    snprintf(url, sizeof url, "https://sts.%s.amazonaws.com/", ch->cfg->region);
  e_role = form_encode(role);
  e_name = name != NULL ? form_encode(name) : NULL;
  e_token = form_encode(token);
  if (e_role == NULL || e_name == NULL || e_token == NULL ||
      plugin_buf_append(&form, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=",
                        60) != 0 ||
      plugin_buf_append(&form, e_role, strlen(e_role)) != 0 ||
      plugin_buf_append(&form, "&RoleSessionName=", 17) != 0 ||
      plugin_buf_append(&form, e_name, strlen(e_name)) != 0 ||
      plugin_buf_append(&form, "&WebIdentityToken=", 18) != 0 ||
      plugin_buf_append(&form, e_token, strlen(e_token)) != 0) {
    rc = fail(ch, TF_RESOURCE_EXHAUSTED, "s3: out of memory%s%s", "", "");
    goto done;
  }
  if (fetch(ch, "POST", url, NULL, form.data, 5000, 3, 0, &f) != 0) {
    rc = fail(ch, TF_UNAVAILABLE, "s3: web identity: STS at %s did not answer: %s", url, f.error);
  } else if (f.http != 200) {
    char* code = objstore_xml_find(f.body.data, f.body.len, "Code");
    char* message = objstore_xml_find(f.body.data, f.body.len, "Message");
    char detail[600];
    snprintf(detail, sizeof detail, "HTTP %ld %s: %s", f.http, code ? code : "",
             message ? message : "");
    rc = fail(ch, TF_PERMISSION_DENIED,
              "s3: web identity: STS refused AssumeRoleWithWebIdentity for role '%s' (%s)", role,
              detail);
    free(code);
    free(message);
  } else {
    const char* xml = f.body.data;
    rc = take(ch, objstore_xml_find(xml, f.body.len, "AccessKeyId"),
              objstore_xml_find(xml, f.body.len, "SecretAccessKey"),
              objstore_xml_find(xml, f.body.len, "SessionToken"),
              objstore_xml_find(xml, f.body.len, "Expiration"), "web identity (STS)");
  }
done:
  plugin_buf_free(&form);
  plugin_buf_free(&f.body);
  free(token_file);
  free(role);
  free(name);
  free(token);
  free(e_role);
  free(e_name);
  free(e_token);
  return rc;
}

/* ---- 2 and 4. keys in a profile -------------------------------------------------------- */

static int profile_keys(chain* ch, int credentials_file) {
  char* (*get)(const profile*, const char*) = credentials_file ? from_credentials : from_config;
  char* access_key = get(&ch->p, "aws_access_key_id");
  char source[sizeof ch->found->source];
  if (access_key == NULL) return 0;
  snprintf(source, sizeof source, "profile '%.40s' in %.130s", ch->p.name,
           credentials_file ? ch->p.credentials_path : ch->p.config_path);
  return take(ch, access_key, get(&ch->p, "aws_secret_access_key"),
              get(&ch->p, "aws_session_token"), NULL, source);
}

/* ---- 3. credential_process ---------------------------------------------------------------- */

static uint64_t monotonic_ms(void);

/* Waits for pid until deadline (monotonic ms); kills it when the time is
 * up. 0 with *exit_status, or 1 when it was killed. */
static int reap(pid_t pid, uint64_t deadline, int* exit_status) {
  for (;;) {
    pid_t done = waitpid(pid, exit_status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return 0;
    if (monotonic_ms() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, exit_status, 0) < 0 && errno == EINTR) {
      }
      return 1;
    }
    {
      struct timespec pause = {0, 10 * 1000000L};
      nanosleep(&pause, NULL);
    }
  }
}

/* Runs command, a program and its arguments as boto3 takes them, through
 * /bin/sh's exec (so the program is the process killed at the limit),
 * collecting what it prints (up to MAX_DOCUMENT bytes) for at most
 * timeout_ms: 0 with *exit_status when it finished, 1 when it ran out of
 * time (it is killed), -1 when it could not start. posix_spawn, as popen:
 * a fork would run the fork handlers, which take the credentials lock this
 * runs under. */
static int run_timed(const char* command, int64_t timeout_ms, plugin_buf* out, int* exit_status) {
  const uint64_t deadline = monotonic_ms() + (uint64_t)timeout_ms;
  char* argv[4];
  char chunk[4096];
  char* line = malloc(strlen(command) + sizeof "exec ");
  posix_spawn_file_actions_t actions;
  int fds[2], failed;
  pid_t pid;
  argv[0] = "sh";
  argv[1] = "-c";
  argv[2] = line;
  argv[3] = NULL;
  if (line == NULL) {
    errno = ENOMEM;
    return -1;
  }
  strcpy(line, "exec ");
  strcat(line, command);
  if (pipe(fds) != 0) {
    free(line);
    return -1;
  }
  failed = posix_spawn_file_actions_init(&actions);
  if (failed == 0) {
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    failed = posix_spawn(&pid, "/bin/sh", &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
  }
  free(line);
  if (failed != 0) {
    close(fds[0]);
    close(fds[1]);
    errno = failed; /* for the caller's message */
    return -1;
  }
  close(fds[1]);
  for (;;) {
    uint64_t now = monotonic_ms();
    struct pollfd readable;
    ssize_t n;
    int ready;
    if (now >= deadline) break;
    readable.fd = fds[0];
    readable.events = POLLIN;
    readable.revents = 0;
    ready = poll(&readable, 1, (int)(deadline - now));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    n = read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* the end of its output (or an error reading it) */
    if (out->len < MAX_DOCUMENT) plugin_buf_append(out, chunk, (size_t)n);
  }
  close(fds[0]);
  return reap(pid, deadline, exit_status);
}

static int credential_process(chain* ch) {
  char* command = from_config(&ch->p, "credential_process");
  plugin_buf out = {0};
  char status_text[32], limit[32];
  char* version;
  int rc, ran, exit_status = -1;
  if (command == NULL || *command == '\0') {
    free(command);
    return 0;
  }
  ran = run_timed(command, ch->cfg->credential_timeout_ms, &out, &exit_status);
  plugin_buf_append(&out, "", 0);
  if (ran < 0) {
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: credential_process '%s' could not start: %s", command,
              strerror(errno));
  } else if (ran > 0) {
    snprintf(limit, sizeof limit, "%lld", (long long)ch->cfg->credential_timeout_ms);
    rc = fail(ch, TF_DEADLINE_EXCEEDED,
              "s3: credential_process '%s' did not finish within credential_timeout_ms=%s; it "
              "was killed",
              command, limit);
  } else if (exit_status != 0 || out.data == NULL) {
    snprintf(status_text, sizeof status_text, "%d",
             WIFEXITED(exit_status) ? WEXITSTATUS(exit_status) : -1);
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: credential_process '%s' exited with status %s",
              command, status_text);
  } else if ((version = objstore_json_get(out.data, out.len, "Version")) == NULL ||
             strcmp(version, "1") != 0) {
    free(version);
    rc = fail(ch, TF_UNAUTHENTICATED,
              "s3: credential_process '%s' did not print a JSON object with \"Version\": 1%s",
              command, "");
  } else {
    free(version);
    rc = take(ch, objstore_json_get(out.data, out.len, "AccessKeyId"),
              objstore_json_get(out.data, out.len, "SecretAccessKey"),
              objstore_json_get(out.data, out.len, "SessionToken"),
              objstore_json_get(out.data, out.len, "Expiration"), "credential_process");
  }
  if (out.data != NULL) memset(out.data, 0, out.len);
  plugin_buf_free(&out);
  free(command);
  return rc;
}

/* The JSON both metadata services answer with. */
static int take_json(chain* ch, const fetched* f, const char* source) {
  const char* j = f->body.data;
  return take(ch, objstore_json_get(j, f->body.len, "AccessKeyId"),
              objstore_json_get(j, f->body.len, "SecretAccessKey"),
              objstore_json_get(j, f->body.len, "Token"), objstore_json_get(j, f->body.len, "Expiration"),
              source);
}

/* ---- 5. container credentials ------------------------------------------------------------- */

/* A full URI must be https or name a loopback or the container agents'
 * own addresses (botocore's rule: never send the token elsewhere). */
/* Whether the container credentials may be fetched from uri, with the
 * authorization token: https to any host, or http to a loopback address or
 * the container agent's (as botocore allows), judged by the host the URL
 * parses to, never by its text: "http://localhost:80@attacker/" and
 * "http://127.attacker/" name other hosts. */
static int allowed_container_uri(const char* uri) {
  static const char* const agents[] = {"169.254.170.2", "169.254.170.23", "[fd00:ec2::23]",
                                       "localhost", "[::1]"};
  CURLU* url = curl_url();
  char *scheme = NULL, *host = NULL, *user = NULL;
  int allowed = 0;
  size_t i;
  if (url == NULL) return 0;
  if (curl_url_set(url, CURLUPART_URL, uri, 0) == CURLUE_OK &&
      curl_url_get(url, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(url, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
      curl_url_get(url, CURLUPART_USER, &user, 0) == CURLUE_NO_USER) {
    struct in_addr v4;
    if (strcmp(scheme, "https") == 0) {
      allowed = 1;
    } else if (strcmp(scheme, "http") == 0) {
      for (i = 0; i < sizeof agents / sizeof agents[0]; ++i)
        if (strcmp(host, agents[i]) == 0) allowed = 1;
      /* 127.0.0.0/8, written as a dotted address (not a name that starts so) */
      if (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) allowed = 1;
    }
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_url_cleanup(url);
  return allowed;
}

static int container(chain* ch) {
  const char* relative = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const char* full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  const char* token_file = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  const char* token_env = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  char url[1024];
  char* token = NULL;
  struct curl_slist* headers = NULL;
  fetched f;
  int rc;
  if (relative != NULL && *relative) {
    if (relative[0] != '/')  /* else "...170.2" + ".attacker/x" would name another host */
      return fail(ch, TF_INVALID_ARGUMENT,
                  "s3: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI '%s' must start with '/'%s", relative, "");
    snprintf(url, sizeof url, "http://169.254.170.2%s", relative);
  } else if (full != NULL && *full) {
    if (!allowed_container_uri(full))
      return fail(ch, TF_INVALID_ARGUMENT,
                  "s3: AWS_CONTAINER_CREDENTIALS_FULL_URI '%s' is neither https nor a loopback "
                  "or container-agent address%s",
                  full, "");
    snprintf(url, sizeof url, "%s", full);
  } else {
    return 0;
  }
  if (token_file != NULL && *token_file) {
    char* text = plugin_read_text(token_file, MAX_DOCUMENT);
    if (text == NULL)
      return fail(ch, TF_UNAUTHENTICATED, "s3: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE '%s'%s",
                  token_file, "");
    text[strcspn(text, "\r\n")] = '\0';
    token = text;
  } else if (token_env != NULL && *token_env) {
    token = strdup(token_env);
  }
  if (token != NULL) {
    plugin_buf line = {0};
    plugin_buf_append(&line, "Authorization: ", 15);
    plugin_buf_append(&line, token, strlen(token));
    if (line.data != NULL) headers = curl_slist_append(NULL, line.data);
    plugin_buf_free(&line);
  }
  memset(&f, 0, sizeof f);
  if (fetch(ch, "GET", url, headers, NULL, 2000, 3, 1, &f) != 0)
    rc = fail(ch, TF_UNAVAILABLE, "s3: container credentials at %s did not answer: %s", url,
              f.error);
  else if (f.http != 200)
    rc = fail(ch, TF_UNAUTHENTICATED, "s3: container credentials at %s answered %s", url,
              f.http == 401 || f.http == 403 ? "that the authorization token is refused"
                                             : "with an error");
  else
    rc = take_json(ch, &f, "container credentials");
  curl_slist_free_all(headers);
  free(token);
  plugin_buf_free(&f.body);
  return rc;
}

/* ---- 6. EC2 instance metadata (IMDSv2) ---------------------------------------------------- */

static int instance_metadata(chain* ch) {
  const char* disabled = getenv("AWS_EC2_METADATA_DISABLED");
  const char* env_endpoint = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  char* endpoint = env_endpoint != NULL && *env_endpoint
                       ? strdup(env_endpoint)
                       : from_config(&ch->p, "ec2_metadata_service_endpoint");
  char base[512], url[1024], header[600];
  struct curl_slist *ttl = NULL, *with_token = NULL;
  fetched f;
  int rc = 0;
  memset(&f, 0, sizeof f);
  if (disabled != NULL && strcmp(disabled, "true") == 0) {
    free(endpoint);
    snprintf(ch->note, sizeof ch->note, " (instance metadata is disabled)");
    return 0;
  }
  snprintf(base, sizeof base, "%s", endpoint != NULL && *endpoint ? endpoint : "http://169.254.169.254");
  free(endpoint);
  if (base[strlen(base) - 1] == '/') base[strlen(base) - 1] = '\0';
  snprintf(url, sizeof url, "%s/latest/api/token", base);
  ttl = curl_slist_append(NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
  /* One try with a 1 s limit, as boto3: off EC2 nothing answers. */
  if (fetch(ch, "PUT", url, ttl, NULL, 1000, 1, 1, &f) != 0 || f.http != 200) {
    snprintf(ch->note, sizeof ch->note, " (instance metadata at %.150s: %.80s)", base,
             f.http != 0 ? "no token" : f.error);
    goto done;
  }
  snprintf(header, sizeof header, "X-aws-ec2-metadata-token: %s", f.body.data);
  with_token = curl_slist_append(NULL, header);
  snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/", base);
  if (fetch(ch, "GET", url, with_token, NULL, 1000, 1, 1, &f) != 0 || f.http != 200 ||
      f.body.len == 0) {
    snprintf(ch->note, sizeof ch->note, " (instance metadata at %.150s: no IAM role)", base);
    goto done;
  }
  f.body.data[strcspn(f.body.data, "\r\n")] = '\0';
  snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s", base,
           f.body.data);
  if (fetch(ch, "GET", url, with_token, NULL, 1000, 1, 1, &f) != 0 || f.http != 200) {
    rc = fail(ch, TF_UNAVAILABLE, "s3: instance metadata at %s gave no credentials: %s", base,
              f.error);
    goto done;
  }
  rc = take_json(ch, &f, "instance metadata");
done:
  curl_slist_free_all(ttl);
  curl_slist_free_all(with_token);
  plugin_buf_free(&f.body);
  return rc;
}

/* The whole chain for cfg's profile: 0 with ch->found set, or -1. */
static int resolve(s3_fs* fs, const s3_config* cfg, TF_Status* status, s3_credentials** out) {
  chain ch;
  int rc;
  memset(&ch, 0, sizeof ch);
  ch.fs = fs;
  ch.cfg = cfg;
  ch.status = status;
  profile_load(&ch.p, s3_profile_name(cfg));
  if (*cfg->profile != '\0' && strcmp(cfg->profile, "default") != 0 &&
      !profile_exists(&ch.p)) {
    rc = fail(&ch, TF_INVALID_ARGUMENT, "s3: the profile '%s' is in neither %s nor the credentials file",
              cfg->profile, *ch.p.config_path ? ch.p.config_path : "the config file");
  } else if ((rc = web_identity(&ch)) == 0 && (rc = profile_keys(&ch, 1)) == 0 &&
             (rc = credential_process(&ch)) == 0 && (rc = profile_keys(&ch, 0)) == 0 &&
             (rc = container(&ch)) == 0 && (rc = instance_metadata(&ch)) == 0) {
    rc = fail(&ch, TF_UNAUTHENTICATED,
              "s3: no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
              "a profile (AWS_PROFILE, ~/.aws/credentials), web identity, container or "
              "instance credentials, or the option anonymous=1 for public buckets%s%s",
              ch.note, "");
  }
  profile_free(&ch.p);
  *out = ch.found;
  /* to the plugin's log (Python's logging, asyncfs.s3): the source, never a key */
  if (rc == 1) PLUGIN_LOG(TF_INFO, "s3: credentials: %s", ch.found->source);
  else PLUGIN_LOG(TF_WARNING, "s3: %s", TF_Message(status) + (strncmp(TF_Message(status), "s3: ", 4) == 0 ? 4 : 0));
  return rc == 1 ? 0 : -1;
}

/* ---- the cache ----------------------------------------------------------------------------- */

void s3_credentials_init(s3_fs* fs) {
  pthread_mutex_init(&fs->credentials_lock, NULL);
  plugin_fork_guard_mutex(&fs->credentials_lock, PLUGIN_LOCK_DATA);
  fs->credentials = NULL;
  fs->credentials_profile = NULL;
  fs->credentials_failure = TF_NewStatus();
  fs->credentials_asked_ms = 0;
}

void s3_credentials_destroy(s3_fs* fs) {
  plugin_fork_unguard(&fs->credentials_lock);
  pthread_mutex_destroy(&fs->credentials_lock);
  s3_credentials_release(fs->credentials);
  free(fs->credentials_profile);
  TF_DeleteStatus(fs->credentials_failure);
}

static uint64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether c is still good to sign with at now (it has not expired). */
static int usable(const s3_credentials* c, time_t now) {
  return c != NULL && (c->expires == 0 || now < c->expires);
}

int s3_credentials_acquire(s3_fs* fs, const s3_config* cfg, s3_credentials* borrowed,
                           const s3_credentials** out, TF_Status* status) {
  const char* profile = s3_profile_name(cfg);
  s3_credentials* c;
  time_t now;
  *out = NULL;
  if (cfg->anonymous) return 0;
  if (*cfg->access_key != '\0') {
    if (*cfg->secret_key == '\0') {
      TF_SetStatus(status, TF_UNAUTHENTICATED,
                   "s3: an access key id is set but no secret access key "
                   "(AWS_SECRET_ACCESS_KEY, or the option secret_access_key)");
      return -1;
    }
    memset(borrowed, 0, sizeof *borrowed); /* refs 0: never freed */
    borrowed->access_key = cfg->access_key;
    borrowed->secret_key = cfg->secret_key;
    borrowed->session_token = cfg->session_token;
    snprintf(borrowed->source, sizeof borrowed->source, "settings");
    *out = borrowed;
    return 0;
  }
  pthread_mutex_lock(&fs->credentials_lock);
  now = time(NULL);
  if (fs->credentials_profile == NULL || strcmp(fs->credentials_profile, profile) != 0) {
    /* Another profile: forget what the last one gave. */
    s3_credentials_release(fs->credentials);
    fs->credentials = NULL;
    free(fs->credentials_profile);
    fs->credentials_profile = strdup(profile);
    fs->credentials_asked_ms = 0;
  }
  c = fs->credentials;
  if (c == NULL || (c->expires != 0 && now >= c->expires - REFRESH_MARGIN_S)) {
    /* The sources are asked at most once per ASK_INTERVAL_MS, unless what
     * they gave last has expired. */
    uint64_t t = monotonic_ms();
    int recent = fs->credentials_asked_ms != 0 && t - fs->credentials_asked_ms < ASK_INTERVAL_MS;
    if (!recent || (!usable(c, now) && TF_GetCode(fs->credentials_failure) == TF_OK)) {
      s3_credentials* fresh = NULL;
      fs->credentials_asked_ms = t;
      if (resolve(fs, cfg, fs->credentials_failure, &fresh) == 0) {
        s3_credentials_release(c);
        fs->credentials = c = fresh;
        TF_SetStatus(fs->credentials_failure, TF_OK, "");
      }
    }
    /* A failed refresh keeps credentials that have not expired yet. */
    if (!usable(c, now)) {
      if (TF_GetCode(fs->credentials_failure) == TF_OK)
        TF_SetStatus(fs->credentials_failure, TF_UNAUTHENTICATED,
                     "s3: the credentials the sources gave have expired");
      TF_SetStatus(status, TF_GetCode(fs->credentials_failure),
                   TF_Message(fs->credentials_failure));
      pthread_mutex_unlock(&fs->credentials_lock);
      return -1;
    }
  }
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&fs->credentials_lock);
  *out = c;
  return 0;
}

void s3_credential_source(objstore_fs* store, const void* config, char* out, size_t cap) {
  s3_fs* fs = (s3_fs*)store;
  const s3_config* cfg = config;
  s3_credentials borrowed;
  const s3_credentials* c = NULL;
  TF_Status* status = TF_NewStatus();
  if (cfg->anonymous) snprintf(out, cap, "anonymous (the anonymous option)");
  else if (s3_credentials_acquire(fs, cfg, &borrowed, &c, status) != 0)
    snprintf(out, cap, "none found: %s", TF_Message(status));
  else
    snprintf(out, cap, "%s", c != NULL ? c->source : "anonymous");
  s3_credentials_release(c);
  TF_DeleteStatus(status);
}
