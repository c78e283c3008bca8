// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia-peermem.ko, for the kernel test tier (docs/kernel-tier.md).
 *
 * Modelled: NVIDIA's RDMA peer-memory client (https://github.com/NVIDIA/open-gpu-kernel-modules,
 * kernel-open/nvidia-peermem). It calls nvidia's peer-to-peer entry points (nvidia_p2p_get_pages and
 * nvidia_p2p_put_pages, declared in the same repository's kernel-open/nvidia/nv-p2p.h), so the kernel links it to nvidia: nvidia's holders/ lists it and counts one
 * reference for it. Not modelled: any memory registration.
 *
 * Built with NVSTUB_PERMANENT (permanent/), it has no exit function, so the kernel shows it [permanent] in
 * /proc/modules and delete_module(2) refuses it with EBUSY, whatever its count.
 */
#include <linux/module.h>

#include "nvstub.h"

static int __init p2p_user_init(void)
{
	pr_info("nvidia_peermem: nvidia_p2p_get_pages answers %d\n",
		nvidia_p2p_get_pages(0, 0, 0, 0, NULL, NULL, NULL));
	return 0;
}
module_init(p2p_user_init);

#ifndef NVSTUB_PERMANENT
static void __exit p2p_user_exit(void)
{
	nvidia_p2p_put_pages(0, 0, 0, NULL);
}
module_exit(p2p_user_exit);
#endif

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia-peermem.ko for driver-manager's kernel test tier");
