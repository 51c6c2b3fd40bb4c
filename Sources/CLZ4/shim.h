#include <lz4.h>
#include <lz4frame.h>
#include <lz4hc.h>
