// CLZ4 - Debian's liblz4 (liblz4-dev): the LZ4 frame format that Xet's chunk schemes 1 and 2
// store (docs/xet.md). The frame API only; raw blocks are not what Xet stores.
#include <lz4frame.h>
