"""The ``system`` server: host, CPU, memory, disks, processes, network and service checks (psutil, dnspython)."""
