// SPDX-License-Identifier: GPL-2.0
/*
 * A module outside the NVIDIA stack that uses an nvidia symbol (a third-party GPU monitor, say), for the
 * kernel test tier (docs/kernel-tier.md): nvidia's holders/ lists it, so nvidia cannot be unloaded before
 * it, and unloading the NVIDIA stack alone must refuse rather than remove it.
 */
#include <linux/module.h>

#include "nvstub.h"

static int __init gpu_mon_init(void)
{
	pr_info("gpu_mon: watching %d GPUs\n", nvstub_gpu_count());
	return 0;
}

static void __exit gpu_mon_exit(void)
{
}

module_init(gpu_mon_init);
module_exit(gpu_mon_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("a non-NVIDIA module using nvidia, for driver-manager's kernel test tier");
