/*
 * The text formats stores and credential services answer in: JSON
 * documents (listings, metadata, tokens, errors) and ISO 8601 times. libc
 * only, so tests compile objstore_formats.c on its own
 * (tests/stores/test_formats.py) and check it against Python's parsers.
 */
#ifndef ASYNCFS_OBJSTORE_FORMATS_H_
#define ASYNCFS_OBJSTORE_FORMATS_H_

#include <stddef.h>
#include <stdint.h>

/* A top-level member of the JSON object in json[0, len): a string's value
 * (escapes decoded; \u0000 and malformed text give NULL) or a number's or
 * true/false's text, malloc'd; NULL when absent, null, an object or an
 * array, or when the document is not one well-formed object. */
char* objstore_json_get(const char* json, size_t len, const char* key);

/* The text of a top-level member of the JSON object in json[0, len),
 * whatever its kind, as [*start, *start + *n): 1; 0 when absent; -1 when
 * the document is not one well-formed object. */
int objstore_json_member(const char* json, size_t len, const char* key, const char** start,
                         size_t* n);

/* Several top-level members of the JSON object in json[0, len) in one
 * pass (n at most 16): starts[k] and lens[k] the text of keys[k]'s value,
 * starts[k] NULL when absent. 0, or -1 when the document is not one
 * well-formed object. */
int objstore_json_members(const char* json, size_t len, const char* const* keys, int n,
                          const char** starts, size_t* lens);

/* A member's value text as objstore_json_get gives it (a string decoded,
 * a number or true/false as written; NULL for an object, an array, null,
 * a string holding \u0000, or value NULL), malloc'd. */
char* objstore_json_value(const char* value, size_t len);

/* The elements of the JSON array in array[0, len), one per call: *pos
 * starts at 0; 1 with the next element's text, 0 after the last, -1 when
 * malformed. */
int objstore_json_next(const char* array, size_t len, size_t* pos, const char** start,
                       size_t* n);

/* The JSON string value[0, len) decoded, malloc'd; NULL when it is not
 * one (or holds \u0000). */
char* objstore_json_string(const char* value, size_t len);

/* "2026-11-23T10:00:00Z" (fraction and a numeric offset allowed) as Unix
 * seconds, the fraction dropped; -1 when malformed. */
int64_t objstore_parse_time(const char* iso);
/* The same time in Unix nanoseconds (digits past the ninth cut) into *ns:
 * 0, or -1 when malformed or beyond what int64 nanoseconds hold (years
 * before 1678 or after 2262). */
int objstore_parse_time_ns(const char* iso, int64_t* ns);

#endif /* ASYNCFS_OBJSTORE_FORMATS_H_ */
