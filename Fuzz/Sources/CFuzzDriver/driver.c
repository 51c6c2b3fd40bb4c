// Only the declaration in include/CFuzzDriver.h is needed; a C target must
// have a source file.
#include "CFuzzDriver.h"
