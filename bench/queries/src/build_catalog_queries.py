import json,glob,os,sys
AB=dict(api='api',cw='aws-cloudwatch',iam='aws-iam',sq='aws-sns-sqs',ch='chroma',cd='chrome-devtools',cli='cli',cl='cloud',ce='code-exec',cr='code-runner',co='comms',da='data',dh='dbhub',dc='desktop-commander',dv='devops',dk='duckdb',em='email',xl='excel',fe='fetch',fi='files',fs='filesystem',g='git',gc='git-cyanheads',gq='graphql',jp='jupyter',md='markitdown',mc='memcached',me='memory',ml='ml',mf='mlflow',mo='motherduck',pw='playwright',pg='postgres',rd='redis',st='sequential-thinking',sh='shell',sl='sqlite',sy='system',tm='time',vk='valkey',ws='web-search')
M='/work/wt-toolsel2/src/hanzo_hub/catalog/manifests'
valid={}
for d in sorted(glob.glob(M+'/*')):
    m=json.load(open(d+'/server.json'))['_meta']['dev.hanzo-hub/catalog']
    if m.get('origin')=='fixture': continue
    hid={k for k,v in m.get('toolOverrides',{}).items() if v.get('hidden')}
    for t in json.load(open(d+'/tools.json'))['tools']:
        if t['name'] not in hid: valid[f"{m['id']}__{t['name']}"]=m['category']
out=[];bad=0;cat=None;cats={}
for f in sorted(glob.glob('q*.txt')):
    for line in open(f):
        line=line.strip()
        if not line: continue
        if line.startswith('#'): cat=line[1:].strip(); continue
        q,g=[x.strip() for x in line.split('||')]
        gold=[];alts=[]
        for tok in g.split():
            ids=[]
            for a in tok.split('|'):
                s,n=a.split(':',1); i=f"{AB[s]}__{n}"
                if i not in valid: print('BAD',i,'|',q); bad+=1
                ids.append(i)
            gold.append(ids[0])
            if len(ids)>1: alts.append(ids)
        row={"query":q,"gold":gold}
        if alts: row["alternatives"]=alts
        row["category"]=cat
        out.append(row)
print(len(out),'queries; multi',sum(len(r['gold'])>1 for r in out),'bad',bad)
from collections import Counter
print(Counter(r['category'] for r in out))
covered=Counter(valid[i] for r in out for i in r['gold'])
print(covered)
print('distinct gold tools', len({i for r in out for i in r['gold']}), 'of', len(valid))
qs=Counter(r['query'] for r in out); print([q for q,c in qs.items() if c>1])
if '--write' in sys.argv:
    os.makedirs('/work/wt-toolsel2/bench/queries',exist_ok=True)
    with open('/work/wt-toolsel2/bench/queries/catalog.jsonl','w') as fh:
        for r in out: fh.write(json.dumps(r)+'\n')
