# Thin entry points; the logic lives in scripts/ and playbooks/.
.PHONY: test lint unit package bmc training molecule rehearsal e2e bootstrap reproduce cluster-up cluster-deploy reproduce-down version clean help

INVENTORY ?=
RUN_ID ?=

help:
	@echo "make reproduce   deploy + benchmark + report (virtual cluster by default; INVENTORY=... for a real one;"
	@echo "                 EXTRA_VARS=\"k=v @file.yml\" for every playbook)"
	@echo "make test        install what is needed and run every test tier (lint, unit, package, bmc, training, molecule, rehearsal, e2e)"
	@echo "make lint | unit | package | bmc | training | molecule | rehearsal | e2e   one tier;  make bootstrap   only install"
	@echo "make cluster-up  boot the virtual cluster (1 head + 2 compute VMs);  make cluster-deploy  site.yml on it"
	@echo "make reproduce-down  remove the virtual cluster (the cached VM image stays)"
	@echo "make version VERSION=x.y.z  set the version of dlperf and the collection (pyproject.toml, galaxy.yml, CHANGELOG.md)"

test:
	scripts/test.sh

lint unit package bmc training molecule rehearsal e2e:
	scripts/test.sh $@

bootstrap:
	scripts/bootstrap.sh

# The whole study: virtual cluster (default) or INVENTORY=..., site.yml, validate.yml,
# benchmark.yml (sweep, fetch, report). RUN_ID=... resumes an interrupted run.
reproduce: bootstrap
	.venv/bin/dlperf reproduce --project . $(if $(INVENTORY),--inventory $(INVENTORY)) $(if $(RUN_ID),--run-id $(RUN_ID)) $(foreach v,$(EXTRA_VARS),-e $(v))

# The virtual cluster alone (playbooks/virtual_cluster.yml on inventory/virtual).
cluster-up: bootstrap
	ANSIBLE_CONFIG=$(CURDIR)/ansible.cfg .venv/bin/ansible-playbook -i inventory/virtual playbooks/virtual_cluster.yml

# site.yml on the virtual cluster, with Mitogen (plugins/strategy) and the Horovod wheel that
# bootstrap built (nothing is compiled inside the emulated VMs).
cluster-deploy: bootstrap
	ANSIBLE_CONFIG=$(CURDIR)/ansible.cfg ANSIBLE_STRATEGY=mitogen_linear .venv/bin/ansible-playbook \
	  -i inventory/virtual site.yml -e dl_stack_horovod_wheel=$$(scripts/build-horovod-wheel.sh .venv/bin/python)

reproduce-down: bootstrap
	ANSIBLE_CONFIG=$(CURDIR)/ansible.cfg .venv/bin/ansible-playbook -i inventory/virtual playbooks/virtual_cluster.yml -e state=absent

# The version lives in pyproject.toml; galaxy.yml and CHANGELOG.md's top heading follow it.
version:
	@test -n "$(VERSION)" || { echo "make version: give VERSION=x.y.z, e.g. make version VERSION=0.2.0" >&2; exit 2; }
	python3 scripts/set-version.py $(VERSION)

clean:
	rm -rf .venv .pytest_cache .ruff_cache
