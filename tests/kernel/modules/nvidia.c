// SPDX-License-Identifier: GPL-2.0
/*
 * Stub of nvidia.ko, the core of the NVIDIA driver stack, for the kernel test tier (docs/kernel-tier.md).
 * No hardware: it models only what the host layer of driver-manager reads and what the kernel does with it.
 *
 * Modelled (see NVIDIA's open kernel modules, https://github.com/NVIDIA/open-gpu-kernel-modules,
 * kernel-open/nvidia/nv.c and nv-frontend.c):
 * - Character major 195, 256 minors, taken with register_chrdev_region and one cdev whose file operations
 *   have .owner = THIS_MODULE and whose cdev has no owner, as nv.c's nv_register_chrdev does: every open
 *   file holds exactly one reference on this module. The region is named "nvidia" in /proc/devices, or
 *   "nvidia-frontend" with frontend=1 (the name drivers up to the 535 branch register).
 * - Minors 0..gpus-1 are the GPUs (/dev/nvidiaN), 255 is /dev/nvidiactl, 254 is /dev/nvidia-modeset, whose
 *   opens are forwarded to nvidia_modeset once it has registered itself; an open file then holds a
 *   reference on nvidia_modeset too (try_module_get of its owner, as nv-frontend.c does for the modules it
 *   serves), and -ENODEV without it.
 * - Dynamic majors "nvidia-caps" (/dev/nvidia-caps/nvidia-cap1, -cap2) and "nvidia-caps-imex-channels"
 *   (/dev/nvidia-caps-imex-channels/channel0).
 * - Exported symbols that the dependants use, so that the kernel links them (holders/ and the count), and
 *   nvstub_pin()/nvstub_unpin(): one reference on nvidia without a holders link, the kind that
 *   nvidia-vgpu-vfio takes.
 * - Each GPU is a platform device "nvidia.N" bound to this module's platform driver "nvidia", standing in
 *   for the PCI function that the real module binds (nvidia_drm may parent its DRM device on it, as the
 *   real nvidia-drm does).
 *
 * Not modelled: the real module does not create device nodes (nvidia-modprobe or the driver container
 * mknod them, so /sys/dev/char/195:* does not exist on a real node); this stub creates them through a
 * class so that devtmpfs makes them. No resource manager, no GSP firmware, no GPU reset.
 */
#include <linux/cdev.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/platform_device.h>

#include "nvstub.h"

#define NV_MAJOR 195
#define NV_MINORS 256
#define NV_CTL_MINOR 255
#define NV_MODESET_MINOR 254
#define NV_MAX_GPUS 32
#define NV_CAPS_MINORS 3
#define NV_IMEX_MINORS 1

static int gpus = 2;
module_param(gpus, int, 0444);
MODULE_PARM_DESC(gpus, "number of GPUs: /dev/nvidia0../dev/nvidia{gpus-1} (1..32, default 2)");
static bool frontend;
module_param(frontend, bool, 0444);
MODULE_PARM_DESC(frontend, "register major 195 as \"nvidia-frontend\" (drivers up to 535) instead of \"nvidia\"");

static struct class *nv_class;
static struct cdev nv_cdev;
static struct cdev caps_cdev;
static struct cdev imex_cdev;
static dev_t nv_base;
static dev_t caps_base;
static dev_t imex_base;
static struct platform_device *gpu_devices[NV_MAX_GPUS];
static bool driver_registered;

static DEFINE_MUTEX(modeset_lock);
static const struct nvstub_modeset *modeset_server;

int nvstub_register_modeset(const struct nvstub_modeset *server)
{
	int rc = 0;

	mutex_lock(&modeset_lock);
	if (modeset_server)
		rc = -EBUSY;
	else
		modeset_server = server;
	mutex_unlock(&modeset_lock);
	return rc;
}
EXPORT_SYMBOL_GPL(nvstub_register_modeset);

void nvstub_unregister_modeset(const struct nvstub_modeset *server)
{
	mutex_lock(&modeset_lock);
	if (modeset_server == server)
		modeset_server = NULL;
	mutex_unlock(&modeset_lock);
}
EXPORT_SYMBOL_GPL(nvstub_unregister_modeset);

void nvstub_pin(void)
{
	__module_get(THIS_MODULE);
}
EXPORT_SYMBOL_GPL(nvstub_pin);

void nvstub_unpin(void)
{
	module_put(THIS_MODULE);
}
EXPORT_SYMBOL_GPL(nvstub_unpin);

int nvstub_gpu_count(void)
{
	return gpus;
}
EXPORT_SYMBOL_GPL(nvstub_gpu_count);

struct device *nvstub_gpu_device(int index)
{
	if (index < 0 || index >= gpus || !gpu_devices[index])
		return NULL;
	return &gpu_devices[index]->dev;
}
EXPORT_SYMBOL_GPL(nvstub_gpu_device);

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address, u64 length, void **page_table,
			 void (*free_callback)(void *data), void *data)
{
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address, void *page_table)
{
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

static int nv_modeset_open(struct inode *inode, struct file *file)
{
	const struct nvstub_modeset *server;
	int rc = -ENODEV;

	mutex_lock(&modeset_lock);
	server = modeset_server;
	if (server && try_module_get(server->owner)) {
		rc = server->open ? server->open(inode, file) : 0;
		if (rc == 0)
			file->private_data = (void *)server;
		else
			module_put(server->owner);
	}
	mutex_unlock(&modeset_lock);
	return rc;
}

static int nv_open(struct inode *inode, struct file *file)
{
	unsigned int minor = iminor(inode);

	file->private_data = NULL;
	if (minor == NV_MODESET_MINOR)
		return nv_modeset_open(inode, file);
	if (minor == NV_CTL_MINOR || minor < gpus)
		return 0;
	return -ENODEV;
}

static int nv_release(struct inode *inode, struct file *file)
{
	const struct nvstub_modeset *server = file->private_data;

	if (server) {
		if (server->release)
			server->release(inode, file);
		module_put(server->owner);
	}
	return 0;
}

static const struct file_operations nv_fops = {
	.owner = THIS_MODULE,
	.open = nv_open,
	.release = nv_release,
	.llseek = noop_llseek,
};

static int nv_caps_open(struct inode *inode, struct file *file)
{
	return 0;
}

static const struct file_operations nv_caps_fops = {
	.owner = THIS_MODULE,
	.open = nv_caps_open,
	.llseek = noop_llseek,
};

static int nv_gpu_probe(struct platform_device *pdev)
{
	return 0;
}

static struct platform_driver nv_gpu_driver = {
	.probe = nv_gpu_probe,
	.driver = { .name = "nvidia" },
};

/*
 * A char region of `count` minors named `name`, at major `major` (0: a dynamic one), served by `cdev`;
 * *base is its first number once it is all set up, and stays 0 otherwise.
 */
static int nv_add_region(dev_t *base, unsigned int major, unsigned int count, const char *name,
			 struct cdev *cdev, const struct file_operations *fops)
{
	dev_t first = MKDEV(major, 0);
	int rc;

	if (major)
		rc = register_chrdev_region(first, count, name);
	else
		rc = alloc_chrdev_region(&first, 0, count, name);
	if (rc)
		return rc;
	cdev_init(cdev, fops);
	rc = cdev_add(cdev, first, count);
	if (rc) {
		unregister_chrdev_region(first, count);
		return rc;
	}
	*base = first;
	return 0;
}

static void nv_remove_region(dev_t base, unsigned int count, struct cdev *cdev)
{
	if (!MAJOR(base))
		return;
	cdev_del(cdev);
	unregister_chrdev_region(base, count);
}

static void nv_remove_all(void)
{
	int i;

	if (!IS_ERR_OR_NULL(nv_class)) {
		for (i = 0; i < gpus; i++)
			device_destroy(nv_class, MKDEV(NV_MAJOR, i));
		device_destroy(nv_class, MKDEV(NV_MAJOR, NV_CTL_MINOR));
		device_destroy(nv_class, MKDEV(NV_MAJOR, NV_MODESET_MINOR));
		if (MAJOR(caps_base)) {
			device_destroy(nv_class, MKDEV(MAJOR(caps_base), 1));
			device_destroy(nv_class, MKDEV(MAJOR(caps_base), 2));
		}
		if (MAJOR(imex_base))
			device_destroy(nv_class, imex_base);
		class_destroy(nv_class);
	}
	nv_class = NULL;
	nv_remove_region(imex_base, NV_IMEX_MINORS, &imex_cdev);
	nv_remove_region(caps_base, NV_CAPS_MINORS, &caps_cdev);
	nv_remove_region(nv_base, NV_MINORS, &nv_cdev);
	nv_base = caps_base = imex_base = 0;
	for (i = 0; i < NV_MAX_GPUS; i++) {
		if (gpu_devices[i])
			platform_device_unregister(gpu_devices[i]);
		gpu_devices[i] = NULL;
	}
	if (driver_registered)
		platform_driver_unregister(&nv_gpu_driver);
	driver_registered = false;
}

static int nv_create_nodes(void)
{
	struct device *dev;
	int i;

	for (i = 0; i < gpus; i++) {
		dev = device_create(nv_class, NULL, MKDEV(NV_MAJOR, i), NULL, "nvidia%d", i);
		if (IS_ERR(dev))
			return PTR_ERR(dev);
	}
	dev = device_create(nv_class, NULL, MKDEV(NV_MAJOR, NV_CTL_MINOR), NULL, "nvidiactl");
	if (IS_ERR(dev))
		return PTR_ERR(dev);
	dev = device_create(nv_class, NULL, MKDEV(NV_MAJOR, NV_MODESET_MINOR), NULL, "nvidia-modeset");
	if (IS_ERR(dev))
		return PTR_ERR(dev);
	/* A '!' in a device name is a '/' in its node's path (devtmpfs). */
	for (i = 1; i <= 2; i++) {
		dev = device_create(nv_class, NULL, MKDEV(MAJOR(caps_base), i), NULL, "nvidia-caps!nvidia-cap%d", i);
		if (IS_ERR(dev))
			return PTR_ERR(dev);
	}
	dev = device_create(nv_class, NULL, imex_base, NULL, "nvidia-caps-imex-channels!channel0");
	return PTR_ERR_OR_ZERO(dev);
}

static int __init nv_init(void)
{
	int rc, i;

	if (gpus < 1 || gpus > NV_MAX_GPUS)
		return -EINVAL;
	rc = platform_driver_register(&nv_gpu_driver);
	if (rc)
		return rc;
	driver_registered = true;
	for (i = 0; i < gpus; i++) {
		gpu_devices[i] = platform_device_register_simple("nvidia", i, NULL, 0);
		if (IS_ERR(gpu_devices[i])) {
			rc = PTR_ERR(gpu_devices[i]);
			gpu_devices[i] = NULL;
			goto fail;
		}
	}
	rc = nv_add_region(&nv_base, NV_MAJOR, NV_MINORS, frontend ? "nvidia-frontend" : "nvidia", &nv_cdev, &nv_fops);
	if (rc)
		goto fail;
	rc = nv_add_region(&caps_base, 0, NV_CAPS_MINORS, "nvidia-caps", &caps_cdev, &nv_caps_fops);
	if (rc)
		goto fail;
	rc = nv_add_region(&imex_base, 0, NV_IMEX_MINORS, "nvidia-caps-imex-channels", &imex_cdev, &nv_caps_fops);
	if (rc)
		goto fail;
	nv_class = class_create(THIS_MODULE, "nvidia-stub");
	if (IS_ERR(nv_class)) {
		rc = PTR_ERR(nv_class);
		goto fail;
	}
	rc = nv_create_nodes();
	if (rc)
		goto fail;
	return 0;
fail:
	nv_remove_all();
	return rc;
}

static void __exit nv_exit(void)
{
	nv_remove_all();
}

module_init(nv_init);
module_exit(nv_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("stub of nvidia.ko for driver-manager's kernel test tier");
