#include "CSyncCountingVFS.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

// One counter per file name ever opened. Names are few in a test process;
// the table only grows and is never freed.
typedef struct {
    char *name;
    long long syncs;
} Counter;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Counter *counters = NULL;
static int counterCount = 0;
static int counterCapacity = 0;

/// The index of `name`'s counter, created if needed; -1 if out of memory.
static int counter_index(const char *name) {
    pthread_mutex_lock(&lock);
    int index = -1;
    for (int i = 0; i < counterCount; i++) {
        if (strcmp(counters[i].name, name) == 0) { index = i; break; }
    }
    if (index < 0) {
        if (counterCount == counterCapacity) {
            int capacity = counterCapacity ? counterCapacity * 2 : 64;
            Counter *grown = realloc(counters, sizeof(Counter) * (size_t)capacity);
            if (grown) { counters = grown; counterCapacity = capacity; }
        }
        char *copy = counterCount < counterCapacity ? strdup(name) : NULL;
        if (copy) {
            counters[counterCount] = (Counter){ copy, 0 };
            index = counterCount++;
        }
    }
    pthread_mutex_unlock(&lock);
    return index;
}

long long chronicle_sync_counting_vfs_syncs(const char *prefix) {
    size_t length = strlen(prefix);
    long long total = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < counterCount; i++) {
        if (strncmp(counters[i].name, prefix, length) == 0) total += counters[i].syncs;
    }
    pthread_mutex_unlock(&lock);
    return total;
}

// An open file: our methods, the counter, then the wrapped VFS's file.
typedef struct {
    sqlite3_file base;
    int counter;
    sqlite3_file *real;
} CountingFile;

static sqlite3_vfs *wrapped = NULL;

#define REAL(file) (((CountingFile *)(file))->real)

static int c_close(sqlite3_file *f) {
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    f->pMethods = NULL;
    return rc;
}
static int c_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int c_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xWrite(REAL(f), b, n, o); }
static int c_truncate(sqlite3_file *f, sqlite3_int64 size) { return REAL(f)->pMethods->xTruncate(REAL(f), size); }
static int c_sync(sqlite3_file *f, int flags) {
    int counter = ((CountingFile *)f)->counter;
    if (counter >= 0) {
        pthread_mutex_lock(&lock);
        counters[counter].syncs += 1;
        pthread_mutex_unlock(&lock);
    }
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int c_file_size(sqlite3_file *f, sqlite3_int64 *size) { return REAL(f)->pMethods->xFileSize(REAL(f), size); }
static int c_lock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xLock(REAL(f), level); }
static int c_unlock(sqlite3_file *f, int level) { return REAL(f)->pMethods->xUnlock(REAL(f), level); }
static int c_check_reserved_lock(sqlite3_file *f, int *out) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out); }
static int c_file_control(sqlite3_file *f, int op, void *arg) { return REAL(f)->pMethods->xFileControl(REAL(f), op, arg); }
static int c_sector_size(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int c_device_characteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int c_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **out) {
    return REAL(f)->pMethods->xShmMap(REAL(f), page, size, extend, out);
}
static int c_shm_lock(sqlite3_file *f, int offset, int n, int flags) { return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags); }
static void c_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int c_shm_unmap(sqlite3_file *f, int deleteFlag) { return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag); }
static int c_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **out) { return REAL(f)->pMethods->xFetch(REAL(f), o, n, out); }
static int c_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return REAL(f)->pMethods->xUnfetch(REAL(f), o, p); }

// One table per io_methods version, so a file offers exactly the methods the
// wrapped file has (index = version - 1).
static sqlite3_io_methods methods[3];

static int c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    CountingFile *file = (CountingFile *)f;
    file->real = (sqlite3_file *)(file + 1);
    file->counter = name ? counter_index(name) : -1;
    f->pMethods = NULL;
    int rc = wrapped->xOpen(wrapped, name, file->real, flags, outFlags);
    if (file->real->pMethods) {
        int version = file->real->pMethods->iVersion;
        f->pMethods = &methods[(version < 1 ? 1 : version > 3 ? 3 : version) - 1];
    }
    return rc;
}
static int c_delete(sqlite3_vfs *v, const char *name, int syncDir) { (void)v; return wrapped->xDelete(wrapped, name, syncDir); }
static int c_access(sqlite3_vfs *v, const char *name, int flags, int *out) { (void)v; return wrapped->xAccess(wrapped, name, flags, out); }
static int c_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out) { (void)v; return wrapped->xFullPathname(wrapped, name, n, out); }
static void *c_dl_open(sqlite3_vfs *v, const char *name) { (void)v; return wrapped->xDlOpen(wrapped, name); }
static void c_dl_error(sqlite3_vfs *v, int n, char *out) { (void)v; wrapped->xDlError(wrapped, n, out); }
static void (*c_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void) { (void)v; return wrapped->xDlSym(wrapped, h, sym); }
static void c_dl_close(sqlite3_vfs *v, void *h) { (void)v; wrapped->xDlClose(wrapped, h); }
static int c_randomness(sqlite3_vfs *v, int n, char *out) { (void)v; return wrapped->xRandomness(wrapped, n, out); }
static int c_sleep(sqlite3_vfs *v, int us) { (void)v; return wrapped->xSleep(wrapped, us); }
static int c_current_time(sqlite3_vfs *v, double *out) { (void)v; return wrapped->xCurrentTime(wrapped, out); }
static int c_get_last_error(sqlite3_vfs *v, int n, char *out) { (void)v; return wrapped->xGetLastError(wrapped, n, out); }
static int c_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out) { (void)v; return wrapped->xCurrentTimeInt64(wrapped, out); }

static sqlite3_vfs counting;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int installResult = SQLITE_OK;

static void install(void) {
    wrapped = sqlite3_vfs_find(NULL);
    if (!wrapped) { installResult = SQLITE_ERROR; return; }
    for (int v = 0; v < 3; v++) {
        methods[v] = (sqlite3_io_methods){
            .iVersion = v + 1, .xClose = c_close, .xRead = c_read, .xWrite = c_write, .xTruncate = c_truncate,
            .xSync = c_sync, .xFileSize = c_file_size, .xLock = c_lock, .xUnlock = c_unlock,
            .xCheckReservedLock = c_check_reserved_lock, .xFileControl = c_file_control, .xSectorSize = c_sector_size,
            .xDeviceCharacteristics = c_device_characteristics,
            .xShmMap = v >= 1 ? c_shm_map : NULL, .xShmLock = v >= 1 ? c_shm_lock : NULL,
            .xShmBarrier = v >= 1 ? c_shm_barrier : NULL, .xShmUnmap = v >= 1 ? c_shm_unmap : NULL,
            .xFetch = v >= 2 ? c_fetch : NULL, .xUnfetch = v >= 2 ? c_unfetch : NULL,
        };
    }
    // Version 2 at most: the version 3 system-call overrides are not forwarded.
    counting = (sqlite3_vfs){
        .iVersion = wrapped->iVersion < 2 ? wrapped->iVersion : 2,
        .szOsFile = (int)sizeof(CountingFile) + wrapped->szOsFile,
        .mxPathname = wrapped->mxPathname, .zName = "chronicle-sync-counting",
        .xOpen = c_open, .xDelete = c_delete, .xAccess = c_access, .xFullPathname = c_full_pathname,
        .xDlOpen = c_dl_open, .xDlError = c_dl_error, .xDlSym = c_dl_sym, .xDlClose = c_dl_close,
        .xRandomness = c_randomness, .xSleep = c_sleep, .xCurrentTime = c_current_time,
        .xGetLastError = c_get_last_error,
        .xCurrentTimeInt64 = wrapped->iVersion >= 2 ? c_current_time_int64 : NULL,
    };
    installResult = sqlite3_vfs_register(&counting, 1);
}

int chronicle_sync_counting_vfs_install(void) {
    pthread_once(&once, install);
    return installResult;
}
