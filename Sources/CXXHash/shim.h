// xxHash from Debian's libxxhash-dev, compiled into the caller from its
// header (`XXH_INLINE_ALL`, which the header offers for this): the shared
// library's build hashes 64 KiB blocks about a quarter slower than the same
// code compiled here (docs/benchmarks.md). Functions are named with the
// `XXH_INLINE_` prefix: `XXH_INLINE_XXH64`, `XXH_INLINE_XXH3_64bits`.
#define XXH_INLINE_ALL
#include <xxhash.h>
