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
		/* Whole groups of 1..5 members; each group's entry is its first member. */
		if (cfg.replicas < 1 || cfg.replicas > ORCH_REPLICAS_MAX ||
		    cfg.nmembers != cfg.nservers * cfg.replicas)
			abort();
		for (unsigned int g = 0; g < cfg.nservers; g++)
			if (strcmp(cfg.servers[g].name, orch_cfg_member(&cfg, g, 0)->name))
				abort();
		for (unsigned int i = 0; cfg.replicas > 1 && i < cfg.nmembers; i++)
			if (!cfg.members[i].log_address[0])
				abort();
	}
	free(text);
	return 0;
}
