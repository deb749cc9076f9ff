/*
 * What the runtime's files share: how they export a name. The runtime is
 * built with hidden visibility; what plugins import (AF_*, status.c) and
 * what the core calls (ASYNCFS_*, runtime_core.h) is exported by name.
 */
#ifndef ASYNCFS_RUNTIME_EXPORT_H_
#define ASYNCFS_RUNTIME_EXPORT_H_

#define RUNTIME_EXPORT __attribute__((visibility("default")))

#endif /* ASYNCFS_RUNTIME_EXPORT_H_ */
