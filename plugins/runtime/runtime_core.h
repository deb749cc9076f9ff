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

/* The runtime's status, visible to the core only (plugins see it opaque):
 * the core reads and resets codes without a call. */
struct TF_Status {
  TF_Code code;
  char* message; /* NULL means "" */
};

/* ---- TensorFlow's status and environment API, under asyncfs's names ----
 * The runtime exports each TF_X of filesystem_interface.h as AF_X, a name
 * TensorFlow never uses, so that loading asyncfs never changes what
 * TensorFlow's own libraries bind to. The loader renames a plugin's TF_X
 * imports to AF_X in the private copy it loads (docs/plugin-abi.md,
 * "Beside TensorFlow"). */
TF_Status* AF_NewStatus(void);
void AF_DeleteStatus(TF_Status* s);
void AF_SetStatus(TF_Status* s, TF_Code code, const char* msg);
void AF_SetStatusFromIOError(TF_Status* s, int error_code, const char* context);
TF_Code AF_GetCode(const TF_Status* s);
const char* AF_Message(const TF_Status* s);
uint64_t AF_NowNanos(void);
uint64_t AF_NowMicros(void);
uint64_t AF_NowSeconds(void);
void AF_DefaultThreadOptions(TF_ThreadOptions* options);
TF_Thread* AF_StartThread(const TF_ThreadOptions* options,
                          const char* thread_name, void (*work_func)(void*),
                          void* param);
void AF_JoinThread(TF_Thread* thread);
char* AF_GetTempFileName(const char* extension);
void AF_Log(TF_LogLevel level, const char* fmt, ...);
void AF_VLog(int level, const char* fmt, ...);

/* Plugins' log lines go into a bounded queue (on) instead of stderr: lines
 * below least (a TF_LogLevel) are not even formatted, TF_VLog lines up to
 * verbose are kept (log.c). */
void ASYNCFS_LogToQueue(int on, int least, int verbose);
/* The next queued line into out (NUL-terminated, cut to cap) and its
 * level (a TF_LogLevel, -1 for TF_VLog): 1; 0 when none came within
 * timeout_ms or the queue was turned off. */
int ASYNCFS_NextLogLine(char* out, size_t cap, int* level, int timeout_ms);

/* n fresh statuses, all OK; NULL when out of memory. */
TF_Status** ASYNCFS_NewStatusArray(int n);
void ASYNCFS_DeleteStatusArray(TF_Status** statuses, int n);
/* codes[i] = TF_GetCode(statuses[i]) for i < n. */
void ASYNCFS_StatusArrayCodes(TF_Status* const* statuses, int n, int* codes);

/* ---- composite calls: one transition into C per logical operation ----- */

/* The plugin's translation of uri, written to out (NUL-terminated); returns
 * its length, -1 when it does not fit in cap, -2 when the plugin has no
 * translate_name (the core then applies the generic rule). */
int ASYNCFS_TranslateName(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                          void (*plugin_free)(void*), const char* uri,
                          char* out, size_t cap);

/* Translates uri (TensorFlow's generic rule when the plugin has no
 * translate_name), opens it with new_random_access_file and reads up to cap
 * bytes from its start into head. Returns the count read. When it is less
 * than cap, that is the whole file and the file is closed; otherwise the
 * file stays open and *size is its size (get_file_size, else stat). -1 with
 * status set: nothing is left open. */
int64_t ASYNCFS_OpenForRead(const TF_FilesystemOps* ops,
                            const TF_RandomAccessFileOps* file_ops,
                            const TF_Filesystem* fs,
                            void (*plugin_free)(void*), const char* uri,
                            TF_RandomAccessFile* file, char* head, size_t cap,
                            int64_t* size, TF_Status* status);

/* The whole file at uri, as ASYNCFS_OpenForRead reads one that fits in
 * cap, made only from what the plugin holds at hand (its
 * new_random_access_file_if_ready and read_if_ready), so that it may run
 * on an event loop's thread: the count read, less than cap, with the file
 * closed. -1 with TF_UNAVAILABLE when it is not all at hand, the plugin
 * offers neither op, or the file does not fit in cap: read it on a worker.
 * -1 with another status: the answer the open gave at hand (NOT_FOUND,
 * ...). Nothing is left open. */
int64_t ASYNCFS_ReadIfReady(const TF_FilesystemOps* ops,
                            const TF_RandomAccessFileOps* file_ops,
                            const TF_Filesystem* fs,
                            void (*plugin_free)(void*), const char* uri,
                            char* out, size_t cap, TF_Status* status);

/* stat of uri made only from what the plugin holds at hand (its
 * stat_if_ready), so that it may run on an event loop's thread: stats set
 * and OK; TF_UNAVAILABLE when it is not at hand or the plugin does not
 * offer the op: stat it on a worker; another status: the answer stat gives
 * (NOT_FOUND, ...), which was at hand. */
void ASYNCFS_StatIfReady(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                         void (*plugin_free)(void*), const char* uri,
                         TF_FileStatistics* stats, TF_Status* status);

/* read, then cleanup: the handle is released whatever happens. Returns the
 * count read (a short count at end of file is not an error here). */
int64_t ASYNCFS_ReadAndClose(const TF_RandomAccessFileOps* file_ops,
                             TF_RandomAccessFile* file, uint64_t offset,
                             size_t n, char* buffer, TF_Status* status);

/* Reads whole files one after another into out, each right after the one
 * before, for the n NUL-terminated URIs packed one after another in uris
 * (opened as ASYNCFS_OpenForRead does): sizes[i] is file i's byte count, or
 * 0 with statuses[i] set when it failed. Stops at the first file that does
 * not fit in what is left of cap (sizes[i] = -1, closed) and returns its
 * index; returns n when every file was tried. *elapsed_ns is the time it
 * took. Many files per call into C: the bulk path of dataset prefetch.
 * A plugin that offers read_files (op 41) is handed them in runs, through
 * it, as many as fit twice over in what is left. */
int ASYNCFS_ReadFiles(const TF_FilesystemOps* ops,
                      const TF_RandomAccessFileOps* file_ops,
                      const TF_Filesystem* fs, void (*plugin_free)(void*),
                      const char* uris, int n, char* out, size_t cap,
                      int64_t* sizes, TF_Status** statuses,
                      uint64_t* elapsed_ns);

/* The plugin's names for the n NUL-terminated URIs packed one after
 * another in uris (as ASYNCFS_TranslateName: TensorFlow's generic rule
 * where the plugin has no translate_name), for an op that takes many paths;
 * NULL when memory runs out. Release with ASYNCFS_FreeNames(paths, n). */
char** ASYNCFS_TranslateNames(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                              void (*plugin_free)(void*), const char* uris, int n);
void ASYNCFS_FreeNames(char** paths, int n);

/* Translates each of the n NUL-terminated URIs packed one after another in
 * uris (ASYNCFS_TranslateNames) and asks paths_exist, or path_exists one by one when
 * the plugin has no batch op. Fills statuses[i]. Returns -1 when neither op
 * exists or memory runs out. */
int ASYNCFS_PathsExist(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                       void (*plugin_free)(void*), const char* uris, int n,
                       TF_Status** statuses);

/* Packs count plugin-allocated strings into one buffer, each followed by a
 * NUL, freeing the strings and the array with plugin_free. Returns the
 * buffer (release with ASYNCFS_Free) and its size in *total; NULL when out
 * of memory (the strings are freed all the same). */
char* ASYNCFS_PackStrings(char** items, int count, void (*plugin_free)(void*),
                          size_t* total);
void ASYNCFS_Free(void* ptr);

/* ---- the path rules every built-in plugin follows ---------------------- */

/* TensorFlow's CleanPath of path ("//", "." and ".." collapsed, no
 * trailing "/", "" becomes "."), written NUL-terminated to out; returns
 * its length, -1 when it needs more than cap bytes or memory runs out. */
int ASYNCFS_CleanPath(const char* path, char* out, size_t cap);
/* TensorFlow's generic TranslateName of uri (the cleaned path part; "/"
 * for none; "" stays ""), as ASYNCFS_CleanPath writes its result. */
int ASYNCFS_GenericTranslateName(const char* uri, char* out, size_t cap);

/* ---- reading what an untrusted plugin handed over, without crashing ---- */

/* Whether n bytes at p can be read (the kernel is asked, so an unmapped
 * address is an answer, not a crash). 1 when the platform cannot tell. */
int ASYNCFS_Readable(const void* p, size_t n);
/* The length of the NUL-terminated string at s, if it is readable and
 * shorter than max; max when no NUL comes within max bytes; -1 when s
 * cannot be read. */
int64_t ASYNCFS_SafeStrnlen(const char* s, size_t max);

/* ---- local paths, for the aiofiles drop-in -------------------------------- */

/* What ASYNCFS_StatPaths gives per path, in order: mode, inode, device,
 * links, uid, gid, size, then seconds and nanoseconds of the last access,
 * modification and status change, then block size, blocks and the device a
 * special file stands for. Inode and the two devices are unsigned in the
 * kernel: read them modulo 2**64. */
#define ASYNCFS_STAT_FIELDS 16

/* stat(2) of each of the n NUL-terminated paths packed one after another in
 * paths (symbolic links followed; a relative path from the working
 * directory), as os.stat makes it: path i's fields at
 * fields[ASYNCFS_STAT_FIELDS * i], errors[i] its errno, or 0. Returns how
 * many failed. */
int ASYNCFS_StatPaths(const char* paths, int n, int64_t* fields, int* errors);

/* The path, opened O_PATH (close-on-exec; symbolic links followed), only
 * when the kernel can do it from what it holds in memory, and only on a
 * filesystem whose fstat(2) of the descriptor is answered from memory too:
 * neither call waits, so both may run on an event loop's thread. Returns
 * the descriptor (fstat it, then close it); -errno for an answer the path's
 * walk through cached entries gave, as stat(2) gives it (ENOENT, ENOTDIR,
 * EACCES, ELOOP, ENAMETOOLONG); or -EAGAIN when it is not at hand (a step
 * not cached, a network filesystem, no openat2): ask ASYNCFS_StatPaths on
 * a worker. Always -EAGAIN off Linux. */
int ASYNCFS_PathIfReady(const char* path);

/* One open of ASYNCFS_OpenPaths (a regular file, to read), made only from
 * what the kernel holds in memory, as ASYNCFS_PathIfReady: the descriptor
 * and its fields; -errno for an answer the walk gave (the errnos above);
 * or -EAGAIN, also for what is not a regular file: open it on a worker. */
int ASYNCFS_OpenIfReady(const char* path, int64_t* fields);

/* open(2) of each of the n regular files at the paths packed as for
 * ASYNCFS_StatPaths, for reading, as the standard library's FileIO opens
 * mode "r" (O_RDONLY and close-on-exec, interrupted calls retried), then
 * fstat(2) of what opened: fds[i] the descriptor and its fields at
 * fields[ASYNCFS_STAT_FIELDS * i]; or fds[i] = -1 and errors[i] the errno.
 * A path that stat(2) finds and that is not a regular file (a directory, a
 * FIFO, whose open may wait for a writer, a device) is not opened: fds[i]
 * = -1, errors[i] = 0. Returns how many were not opened. */
int ASYNCFS_OpenPaths(const char* paths, int n, int* fds, int64_t* fields, int* errors);

/* read(2) of each of the n descriptors, from its offset, into
 * buffer + starts[i], until a read returns 0 (ends[i] = 1: the end of the
 * file when the call was made) or caps[i] bytes are in (ends[i] = 0); an
 * interrupted read is retried. counts[i] the bytes read, errors[i] the
 * errno of a read that failed (what came before it is in counts[i]), or 0.
 * Returns how many failed. */
int ASYNCFS_ReadFds(const int* fds, int n, char* buffer, const int64_t* starts, const int64_t* caps,
                    int64_t* counts, int* ends, int* errors);

/* close(2) of each of the n descriptors (not retried: on Linux a close
 * that was interrupted has closed the descriptor). */
void ASYNCFS_CloseFds(const int* fds, int n);

/* ---- Read-ahead (plugins/runtime/read_ahead.c) ---------------------------
 * A RandomAccessFile's read made on one of the runtime's own threads, which
 * need no interpreter lock, while the reader computes: its bytes wait in a
 * buffer of the runtime's until the reader takes them. */

typedef int64_t (*ASYNCFS_ReadFunction)(const TF_RandomAccessFile* file, uint64_t offset, size_t n,
                                        char* buffer, TF_Status* status);
typedef struct ASYNCFS_ReadAhead ASYNCFS_ReadAhead;

/* Queues read(file, offset, n) for a runtime thread; NULL when out of
 * memory (or read is NULL). The file must stay open until the read is
 * dropped, or until ASYNCFS_WaitReadsOf(file) returns. */
ASYNCFS_ReadAhead* ASYNCFS_StartRead(ASYNCFS_ReadFunction read, const TF_RandomAccessFile* file,
                                     uint64_t offset, size_t n);

/* 1 once the read is done (a check that never waits), else 0. */
int ASYNCFS_ReadIsDone(const ASYNCFS_ReadAhead* read);

/* Waits for the read (or makes it here, when no thread has taken it yet),
 * then returns its count, sets status to its status and *data to its bytes,
 * which stay until the read is dropped. Called at most once per read. */
int64_t ASYNCFS_FinishRead(ASYNCFS_ReadAhead* read, TF_Status* status, const char** data);

/* Frees the read; never waits (one that is running is freed by its thread
 * when it ends). */
void ASYNCFS_DropRead(ASYNCFS_ReadAhead* read);

/* Before file's cleanup: waits for its reads that are running, and ends
 * those still queued without running them (FAILED_PRECONDITION). */
void ASYNCFS_WaitReadsOf(const TF_RandomAccessFile* file);

/* ---- TFRecord framing ---------------------------------------------------- */

/* The offset of the first i in [0, n - 12] at which buf[i..i+12) is a valid
 * TFRecord header (masked CRC-32C of the 8 length bytes equals the 4 bytes
 * after them), or -1 when there is none. */
int64_t ASYNCFS_FindRecordHeader(const char* buf, size_t n);

/* Why ASYNCFS_ParseRecords stopped (stop[1]). */
#define ASYNCFS_RECORDS_MORE 0       /* the next record is not whole in buf (or max were parsed) */
#define ASYNCFS_RECORDS_BAD_LENGTH 1 /* the header at stop[0] fails its checksum */
#define ASYNCFS_RECORDS_BAD_DATA 2   /* the record at stop[0] (stop[2] bytes) fails its data checksum */

/* Parses whole TFRecord records from the start of buf, checking both
 * checksums (CRC-32C, in hardware where the CPU has it) unless verify is 0:
 * at most max of them, record i's data at spans[2i], its length at
 * spans[2i + 1]. Returns how many; stop[0] is where parsing stopped. */
int64_t ASYNCFS_ParseRecords(const char* buf, size_t n, int verify, int64_t* spans, int64_t max,
                             int64_t* stop);

/* ---- the HTTP requests of a plugin call, for the core's traces (requests.c) ---- */

/* One try of a request, as the object-store engine made it. */
typedef struct ASYNCFS_Request {
  char method[16];
  char url[512];    /* scheme://host/path: never the query, which may hold a signature */
  long status;      /* the HTTP status; 0: no answer */
  int error;        /* curl's code; 0: answered */
  int attempt;      /* 1 for a request's first try */
  int64_t start_ns; /* the wall clock (CLOCK_REALTIME), as OpenTelemetry's spans */
  int64_t end_ns;
} ASYNCFS_Request;

/* From now on the requests the calling thread hands to an engine are kept
 * under id (0: no longer kept); returns the id before. */
uint64_t ASYNCFS_CollectRequests(uint64_t id);
/* Moves up to cap of the tries kept under id into out; how many. Tries of
 * requests still under way come later; the oldest of 1024 kept go first. */
int ASYNCFS_TakeRequests(uint64_t id, ASYNCFS_Request* out, int cap);

/* ASYNCFS-CDEF-END */

/* What plugins call (weakly: plugins/objstore): the id the calling
 * thread's requests are kept under (0: none), and a try of such a request,
 * from the engine's thread. */
uint64_t ASYNCFS_RequestsCollector(void);
void ASYNCFS_RecordRequest(uint64_t id, const char* method, const char* url, long status, int error,
                           int attempt, int64_t start_ns, int64_t end_ns);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCFS_RUNTIME_CORE_H_ */
