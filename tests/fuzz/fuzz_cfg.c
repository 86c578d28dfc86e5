/* The config parser on arbitrary text: never crashes, and a parsed config is sane. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct orch_cfg cfg;
	char err[256];
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (orch_cfg_parse(text, "/tmp", &cfg, err, sizeof(err)) == 0) {
		if (cfg.nservers == 0 || cfg.nservers > ORCH_SERVERS_MAX)
			abort();
		if (cfg.strip_size < ORCH_STRIP_MIN || cfg.strip_size > ORCH_STRIP_MAX)
			abort();
		for (unsigned int i = 0; i < cfg.nservers; i++)
			if (!cfg.servers[i].port)
				abort();
	}
	free(text);
	return 0;
}
