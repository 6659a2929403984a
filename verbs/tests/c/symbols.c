/* Versioned lookups and unimplemented symbols of the verbs-compatible library:
 * dlvsym finds every symbol under the version node rdma-core gives it, and a symbol the
 * software NIC does not implement fails at run time with EOPNOTSUPP (never at load time). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

static int passed, failed;
#define CHECK(c, ...) do { if (c) passed++; else { failed++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

int main(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);
	CHECK(h != NULL, "dlopen libibverbs.so.1: %s", dlerror());
	if (!h)
		goto out;
	static const char *const found[][2] = {
		{ "ibv_get_device_list", "IBVERBS_1.1" }, { "ibv_open_device", "IBVERBS_1.1" },
		{ "ibv_create_comp_channel", "IBVERBS_1.0" }, { "ibv_reg_mr_iova2", "IBVERBS_1.8" },
		{ "_ibv_query_gid_ex", "IBVERBS_1.11" }, { "ibv_qp_to_qp_ex", "IBVERBS_1.6" },
		{ "ibv_query_gid_type", "IBVERBS_PRIVATE_34" }, { "mlx5dv_init_obj", "MLX5_1.2" },
		{ "mlx5dv_create_qp", "MLX5_1.3" }, { "mlx5dv_crypto_login", "MLX5_1.21" },
		{ "efadv_query_device", "EFA_1.1" }, { "ibv_get_device_list", "IBVERBS_1.0" },
	};
	for (unsigned i = 0; i < sizeof(found) / sizeof(found[0]); i++)
		CHECK(dlvsym(h, found[i][0], found[i][1]) != NULL, "dlvsym(%s, %s)", found[i][0], found[i][1]);
	CHECK(dlvsym(h, "ibv_get_device_list", "IBVERBS_9.9") == NULL, "a version that does not exist is not found");

	/* The default (newest) versions are the implementation; the pre-1.1 ABI is refused. */
	struct ibv_device **(*list)(int *) = (struct ibv_device **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
	int n = -1;
	struct ibv_device **devs = list ? list(&n) : NULL;
	CHECK(devs != NULL && n >= 1, "ibv_get_device_list@IBVERBS_1.1 lists devices (n=%d)", n);
	if (devs)
		ibv_free_device_list(devs);
	struct ibv_device **(*old)(int *) = (struct ibv_device **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.0");
	errno = 0;
	CHECK(old && old(&n) == NULL && errno == EOPNOTSUPP, "ibv_get_device_list@IBVERBS_1.0 fails with EOPNOTSUPP");

	/* Unimplemented: a pointer-returning and an int-returning stub. */
	void *(*mkey)(void *) = (void *(*)(void *))dlsym(h, "mlx5dv_create_mkey");
	errno = 0;
	CHECK(mkey && mkey(NULL) == NULL && errno == EOPNOTSUPP, "mlx5dv_create_mkey: NULL, EOPNOTSUPP");
	int (*login)(void *, void *) = (int (*)(void *, void *))dlsym(h, "mlx5dv_devx_general_cmd");
	errno = 0;
	CHECK(login && login(NULL, NULL) == EOPNOTSUPP && errno == EOPNOTSUPP, "mlx5dv_devx_general_cmd: EOPNOTSUPP");

	/* libmlx5.so.1 is the same library: one state. */
	void *m = dlopen("libmlx5.so.1", RTLD_NOW);
	CHECK(m != NULL && dlsym(m, "ibv_get_device_list") == dlsym(h, "ibv_get_device_list"),
	      "libmlx5.so.1 and libibverbs.so.1 are one object");
out:
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
