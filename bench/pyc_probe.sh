# Whether the device image's torch has byte-compiled modules, and what importing torch (and scipy.special,
# which the parent's statistics import) costs a fresh interpreter, with and without PYTHONPYCACHEPREFIX.
# Twenty-seventh session, call 4: bash bench/pyc_probe.sh
python3 -c "import torch,os;d=os.path.dirname(torch.__file__);print('torch dir writable', os.access(d,os.W_OK), 'has __pycache__', os.path.isdir(d+'/__pycache__'), 'pyc files', len(os.listdir(d+'/__pycache__')) if os.path.isdir(d+'/__pycache__') else 0)"
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
for i in 1 2; do /usr/bin/time -f "import torch+scipy.special, plain: %e s" python3 -c "import torch, scipy.special"; done
export PYTHONPYCACHEPREFIX=/tmp/pyc
for i in 1 2 3; do /usr/bin/time -f "import torch+scipy.special, PYTHONPYCACHEPREFIX run $i: %e s" python3 -c "import torch, scipy.special"; done
