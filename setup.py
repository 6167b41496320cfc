# nbdev 2 template setup.py: everything is read from settings.ini (edit there, not here).
from configparser import ConfigParser
import setuptools, shlex

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

expected = ('version description keywords author author_email license status min_python '
            'audience language lib_name user').split()
missing = [o for o in expected if o not in cfg]
if missing: raise ValueError(f"settings.ini lacks: {missing}")
setup_cfg = {o: cfg[o] for o in 'version description keywords author author_email'.split()}

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License'),
            'mit': ('MIT License', 'OSI Approved :: MIT License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable',
            '6 - Mature', '7 - Inactive']
py_versions = '3.9 3.10 3.11 3.12 3.13'.split()

requirements = shlex.split(cfg.get('requirements', ''))
dev_requirements = shlex.split(cfg.get('dev_requirements', ''))
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
min_python = cfg['min_python']
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'],
    **setup_cfg,
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]]
                + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    project_urls={'Source': cfg['git_url']},
    # the repro notebooks ship inside the package as attribkit/repro/*.ipynb (`attribkit-reproduce` runs them from any folder)
    packages=setuptools.find_packages(include=[cfg['lib_name'], cfg['lib_name'] + '.*']) + [cfg['lib_name'] + '.repro'],
    package_dir={cfg['lib_name'] + '.repro': cfg['nbs_path'] + '/repro'},
    package_data={cfg['lib_name'] + '.repro': ['*.ipynb']},
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements},
    dependency_links=cfg.get('dep_links', '').split(),
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={'console_scripts': console_scripts, 'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']},
)
