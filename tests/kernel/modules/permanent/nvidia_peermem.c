// SPDX-License-Identifier: GPL-2.0
/* nvidia_peermem built without its exit function (NVSTUB_PERMANENT, permanent/Kbuild). */
#include "../nvidia_peermem.c"
