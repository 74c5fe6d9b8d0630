"""A command started in a private mount namespace where the unified cgroup mount is hidden
(an empty tmpfs over /sys/fs/cgroup/unified, or /sys/fs/cgroup on a unified machine), so a
uexec daemon it starts stays there and runs its sessions on their process groups alone
(root). people.py's and run_timeline.py's rows without cgroups."""

HIDE = ("for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do "
        "[ -e $d/cgroup.procs ] && mount -t tmpfs none $d && break; done; exec \"$@\"")


def argv(command: list[str]) -> list[str]:
    """`command` run that way."""
    return ["unshare", "-m", "sh", "-c", HIDE, "sh", *command]
